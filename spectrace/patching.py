"""Install and remove wrapt wrappers, remembering the originals so `uninstrument()` can
put back the very same objects."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import wrapt

log = logging.getLogger("spectrace")


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
        """Remember a wrap point this SGLang release lacks (once; reported by the caller)."""
        if where not in self.missing:
            self.missing.append(where)

    def wrap(self, owner: Any, attr: str, wrapper, where: str) -> bool:
        """Wrap `owner.attr` (a class or module attribute defined there). A missing wrap
        point, or one wrapt cannot wrap, is remembered and reported by the caller, and the
        other hooks still install."""
        try:
            original = vars(owner).get(attr)
        except TypeError:  # no __dict__
            original = None
        if original is None:
            self.note_missing(f"{where}.{attr}")
            return False
        if self.is_patched(owner, attr):
            return True
        try:
            wrapt.wrap_function_wrapper(owner, attr, wrapper)
        except Exception as exc:  # noqa: BLE001 - skip this hook, keep the others
            from .safety import INTERNAL_ERRORS
            INTERNAL_ERRORS.record(f"wrap:{where}.{attr}", exc)
            self.note_missing(f"{where}.{attr}")
            return False
        self.patches.append(Patch(owner, attr, original))
        return True

    def restore_all(self) -> None:
        for p in reversed(self.patches):
            setattr(p.owner, p.attr, p.original)
        self.patches.clear()
