"""The words of every finding, in one catalogue split by who raises it (`runtime`,
`checkpoint`, `doctor`, `report`): for each kind of finding its code, what is
wrong (and what it does to speculation), and the fix, as `str.format` templates over named
facts. The doctor's judging and the run-time rules fill them alike,
so both say the same thing the same way.

A `Message` renders as "TEXT Fix: FIX" (just TEXT when it has no fix); the smaller
templates below it are the parts some messages choose between.
"""
from __future__ import annotations

from .message import Message  # noqa: F401
from .runtime import *  # noqa: F401,F403
from .checkpoint import *  # noqa: F401,F403
from .doctor import *  # noqa: F401,F403
from .report import *  # noqa: F401,F403
