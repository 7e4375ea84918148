"""Wrap points as data, and the one patcher that applies them.

An adapter states what it wraps as a tuple of `WrapPoint`s: the class and method (or a
module-level function), the hooks that run around it, and the feature test that selects
it. `Patcher.apply(module, points)` installs them with wrapt when the runtime's module is
imported, remembers the originals so `uninstrument()` can put back the very same objects,
and records every required wrap point the installed release lacks (the others still
install). A new draft class or runtime is a new table plus its hook functions.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import wrapt

from .safety import INTERNAL_ERRORS, After, Before, Cleanup, guarded_wrapper

log = logging.getLogger("spectrace")


@dataclass(frozen=True)
class WrapPoint:
    """One function spectrace wraps.

    `target` is `"Class.method"` or a module-level `"function"`; `alternatives` are other
    names of the same method in other releases (the first one present wins). `hook` names
    it in internal-error counts. Around the call run `before` / `after` / `cleanup` (see
    `safety.guarded_wrapper`), or, for a wrapper that must see the arguments go by,
    `make_wrapper(module) -> wrapt wrapper`. `when(module)` selects the point by feature
    (None: always); a point with `required=False` may be absent by design and is then not
    reported as missing.
    """

    target: str
    hook: str
    before: Before | None = None
    after: After | None = None
    cleanup: Cleanup | None = None
    after_needs_ctx: bool = False
    alternatives: tuple[str, ...] = ()
    when: Callable[[ModuleType], bool] | None = None
    required: bool = True
    make_wrapper: Callable[[ModuleType], Callable] | None = None

    def wrapper(self, module: ModuleType):
        if self.make_wrapper is not None:
            return self.make_wrapper(module)
        return guarded_wrapper(self.hook, before=self.before, after=self.after,
                               cleanup=self.cleanup, after_needs_ctx=self.after_needs_ctx)


@dataclass
class Patch:
    owner: Any
    attr: str
    original: Any


class Patcher:
    def __init__(self) -> None:
        self.patches: list[Patch] = []
        self.missing: list[str] = []

    def is_patched(self, owner: Any, attr: str) -> bool:
        return any(p.owner is owner and p.attr == attr for p in self.patches)

    def note_missing(self, where: str) -> None:
        """Remember a wrap point the installed release lacks (once)."""
        if where not in self.missing:
            self.missing.append(where)

    def apply(self, module: ModuleType, points: tuple[WrapPoint, ...]) -> None:
        """Install every point of `points` that applies to `module`."""
        for point in points:
            if point.when is not None and not point.when(module):
                continue
            owner_name, _, _ = point.target.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            where = f"{module.__name__}.{owner_name}" if owner_name else module.__name__
            if owner is None:
                if point.required:
                    self.note_missing(where)
                continue
            names = (point.target.rpartition(".")[2],) + point.alternatives
            attr = next((n for n in names if _defined(owner, n)), None)
            if attr is None:
                if point.required:
                    self.note_missing(f"{where}.{' / '.join(names)}")
                continue
            self.wrap(owner, attr, point.wrapper(module), where)

    def wrap(self, owner: Any, attr: str, wrapper, where: str) -> bool:
        """Wrap `owner.attr` (defined on `owner` itself). One wrapt cannot wrap is
        recorded as missing, and the other hooks still install."""
        original = vars(owner).get(attr) if _has_dict(owner) else None
        if original is None:
            self.note_missing(f"{where}.{attr}")
            return False
        if self.is_patched(owner, attr):
            return True
        try:
            wrapt.wrap_function_wrapper(owner, attr, wrapper)
        except Exception as exc:  # noqa: BLE001 - skip this hook, keep the others
            INTERNAL_ERRORS.record(f"wrap:{where}.{attr}", exc)
            self.note_missing(f"{where}.{attr}")
            return False
        self.patches.append(Patch(owner, attr, original))
        return True

    def restore_all(self) -> None:
        for p in reversed(self.patches):
            setattr(p.owner, p.attr, p.original)
        self.patches.clear()


def _has_dict(owner: Any) -> bool:
    try:
        vars(owner)
    except TypeError:
        return False
    return True


def _defined(owner: Any, attr: str) -> bool:
    """`attr` is defined on `owner` itself (a wrapper on a base class would fire for
    every subclass, so inherited methods do not count)."""
    return _has_dict(owner) and vars(owner).get(attr) is not None
