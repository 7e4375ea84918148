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

    def wrap(self, owner: Any, attr: str, wrapper, where: str) -> bool:
        """Wrap `owner.attr` (a class or module attribute defined there). A missing wrap
        point is remembered and reported by the caller, and the other hooks still install."""
        original = vars(owner).get(attr)
        if original is None:
            self.missing.append(f"{where}.{attr}")
            return False
        if self.is_patched(owner, attr):
            return True
        wrapt.wrap_function_wrapper(owner, attr, wrapper)
        self.patches.append(Patch(owner, attr, original))
        return True

    def restore_all(self) -> None:
        for p in reversed(self.patches):
            setattr(p.owner, p.attr, p.original)
        self.patches.clear()
