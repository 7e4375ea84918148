"""Where the report finds a process's reference (`rules.reference`): the operator's
`SPECTRACE_EXPECTED_ACCEPT_LENGTH` set for `spectrace report` itself, else the one the
server recorded in its resource, else the trainer's evaluation file next to the draft
(speculators' `val_metrics.json`), read without trusting it."""
from __future__ import annotations

import json
import os
from typing import Mapping

from .. import signals
from ..config import SETTINGS
from ..rules import reference
from .snapshot import num

MAX_FILE_BYTES = 1 << 20  # a val_metrics.json is a few hundred bytes


def from_environment(environ: Mapping[str, str] | None = None) -> reference.Reference | None:
    """The report's own setting (`ConfigError`, a ValueError, for a bad value)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(reference.SETTING, "")
    if not raw.strip():
        return None
    value = SETTINGS["expected_accept_length"].kind.parse(reference.SETTING, raw)
    return reference.from_setting(value, "set for spectrace report")


def _trainer_file(draft_model, positions: int) -> reference.Reference | None:
    if not isinstance(draft_model, str) or not draft_model:
        return None
    path = os.path.join(draft_model, reference.SPECULATORS_FILE)
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            metrics = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return None
    return reference.from_speculators(metrics, positions, path)


def reference_of(resource: Mapping, positions: int, environ=None
                 ) -> reference.Reference | None:
    """The first reference found (see the module's docstring), or None."""
    try:
        found = from_environment(environ)
    except ValueError:
        found = None  # `build_report` refuses a bad value before any process is read
    if found is not None:
        return found
    recorded = num(resource.get(signals.RES_EXPECTED_ACCEPT_LENGTH))
    if recorded is not None and recorded >= 1:
        return reference.from_setting(recorded, "the server's setting")
    return _trainer_file(resource.get(signals.RES_DRAFT_MODEL), positions)
