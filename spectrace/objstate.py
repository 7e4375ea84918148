"""State spectrace keeps on a runtime object for as long as that object lives: an eagle
worker (audited yet?), a draft model (its expected widths, the passes found healthy, its
non-finite checks), a vLLM model runner (audited yet? its steps for the agreement
sampling). State that lasts one step is `families.steps.StepInFlight`'s instead.

Why on the object, in one attribute (`ATTR`) of its `__dict__`: a process can hold several
of them (SGLang's DFlash next to an EAGLE-3 draft, vLLM's drafts per rank), so the state
is per object, not per process; it must die with the object (a model reloaded is audited
again); and the draft's check runs on every pass, where a look-up in a registry keyed by
object (a `WeakKeyDictionary`: a Python-level `__getitem__` and a weak reference) costs
several times the one dict read of `obj.__dict__.get(ATTR)`. The attribute's name is
spectrace's own and nothing in the runtimes reads their objects' `__dict__` by name.
"""
from __future__ import annotations

from typing import Callable, TypeVar

ATTR = "_spectrace"
T = TypeVar("T")


def state_of(obj, make: Callable[[], T]) -> T:
    """`obj`'s state, made by `make()` the first time."""
    d = obj.__dict__
    st = d.get(ATTR)
    if st is None:
        st = d[ATTR] = make()
    return st


def peek(obj):
    """`obj`'s state, or None when it has none yet."""
    return obj.__dict__.get(ATTR)
