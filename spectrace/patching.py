"""Wrap points as data, and the one patcher that applies them.

An adapter states what it wraps as a tuple of `WrapPoint`s: the class and method (or a
module-level function), the hooks that run around it, and the feature test that selects
it. `Patcher.apply(module, points)` installs them when the runtime's module is imported
(a plain function takes the original's place, `safety.guarded_function`; wrapt wraps
anything else and the points that bring their own wrapper), remembers the originals so
`uninstrument()` can put back the very same objects, and records every required wrap
point the installed release lacks (the others still install). A new draft class or
runtime is a new table plus its hook functions.

A `before` hook takes the wrapped call's arguments by name: a point's `reads` names the
parameters it takes, and `arg_reader` finds where each sits (position or keyword) in the
real function's signature once, when the point is installed, so a call costs a length
test and an index per argument.
"""
from __future__ import annotations

import inspect
import logging
import sys
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any, Callable, Literal, Union

import wrapt

from .safety import (
    NO_READS, INTERNAL_ERRORS, After, Before, Cleanup, Reads, guarded_function, guarded_wrapper,
)

log = logging.getLogger("spectrace")

# A parameter a hook reads: its name, or its names across releases (the first one the
# function has wins).
Param = Union[str, tuple[str, ...]]


class MissingParameter(LookupError):
    """The wrapped function has none of the names a hook reads."""


def arg_reader(function, reads: tuple[Param, ...] | Literal["all"], method: bool) -> Reads:
    """Where the arguments `reads` sit in a call to `function` as wrapt hands it over
    (without `self` when `method`): each from its position when the call passed it there,
    else its keyword, else the parameter's default (None when it has none); `"all"`: one
    dict of every argument by name. Resolved here, once, from the signature;
    `MissingParameter` when a name is not one of its parameters."""
    if not reads:
        return NO_READS
    signature = inspect.signature(function)
    params = list(signature.parameters.values())[1 if method else 0:]
    if reads == "all":
        bind = signature.replace(parameters=params).bind_partial

        def read_all(args: tuple, kwargs: dict) -> tuple:
            try:
                return (dict(bind(*args, **kwargs).arguments),)
            except TypeError:  # a call that does not bind: the keywords alone
                return (dict(kwargs),)
        return Reads(None, read_all)
    by_name = {p.name: (i, p) for i, p in enumerate(params)}
    spec = []
    for names in ((r,) if isinstance(r, str) else r for r in reads):
        name = next((n for n in names if n in by_name), None)
        if name is None:
            raise MissingParameter(" / ".join(names))
        i, p = by_name[name]
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        spec.append((i if positional else sys.maxsize, name,
                     None if p.default is p.empty else p.default))

    def read(args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        return tuple([args[i] if n > i else kwargs.get(name, default)
                      for i, name, default in spec])
    return Reads(tuple(spec), read)


@dataclass(frozen=True)
class WrapPoint:
    """One function spectrace wraps.

    `target` is `"Class.method"` or a module-level `"function"`; `alternatives` are other
    names of the same method in other releases (the first one present wins). `hook` names
    it in internal-error counts. Around the call run `before` / `after` / `cleanup` (see
    `safety.guarded_wrapper`; `before` takes the arguments named in `reads`, see
    `arg_reader`), or, for a wrapper that must see the arguments go by,
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
    reads: tuple[Param, ...] | Literal["all"] = ()
    alternatives: tuple[str, ...] = ()
    when: Callable[[ModuleType], bool] | None = None
    required: bool = True
    make_wrapper: Callable[[ModuleType], Callable] | None = None

    def replacement(self, module: ModuleType, original: Any, method: bool):
        """What takes the place of `original` (the object found in the owner's namespace;
        `method`: the owner is a class), its argument positions resolved now: a plain
        function (`safety.guarded_function`; in a staticmethod or classmethod where the
        original was one), or a wrapt `FunctionWrapper` for a point that brings its own
        wrapper or an original that is not a plain function."""
        if self.make_wrapper is not None:
            return wrapt.FunctionWrapper(original, self.make_wrapper(module))
        function, kind = original, None
        if isinstance(original, (staticmethod, classmethod)):
            function, kind = original.__func__, type(original)
            method = kind is classmethod
        hooks = dict(before=self.before, after=self.after, cleanup=self.cleanup,
                     after_needs_ctx=self.after_needs_ctx,
                     reads=arg_reader(function, self.reads, method))
        if not isinstance(function, FunctionType):
            return wrapt.FunctionWrapper(original, guarded_wrapper(self.hook, **hooks))
        replaced = guarded_function(self.hook, function, method, **hooks)
        return replaced if kind is None else kind(replaced)


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
            try:
                replacement = point.replacement(module, vars(owner)[attr], owner is not module)
            except (MissingParameter, TypeError, ValueError) as exc:  # no readable signature
                self.note_missing(f"{where}.{attr}({exc})")
                continue
            self.replace(owner, attr, replacement, where)

    def wrap(self, owner: Any, attr: str, wrapper, where: str) -> bool:
        """Wrap `owner.attr` (defined on `owner` itself) in the wrapt wrapper `wrapper`."""
        original = vars(owner).get(attr) if _has_dict(owner) else None
        try:
            replacement = None if original is None else wrapt.FunctionWrapper(original, wrapper)
        except Exception as exc:  # noqa: BLE001 - skip this hook, keep the others
            INTERNAL_ERRORS.record(f"wrap:{where}.{attr}", exc)
            replacement = None
        if replacement is None:
            self.note_missing(f"{where}.{attr}")
            return False
        return self.replace(owner, attr, replacement, where)

    def replace(self, owner: Any, attr: str, replacement, where: str) -> bool:
        """Put `replacement` in the place of `owner.attr` (defined on `owner` itself),
        remembering the original. One that cannot be replaced is recorded as missing, and
        the other hooks still install."""
        original = vars(owner).get(attr) if _has_dict(owner) else None
        if original is None:
            self.note_missing(f"{where}.{attr}")
            return False
        if self.is_patched(owner, attr):
            return True
        try:
            setattr(owner, attr, replacement)
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


def is_installed(obj: Any) -> bool:
    """`obj`, found in a class's or module's namespace, is a spectrace hook the Patcher put
    there (a `guarded_function`, in a staticmethod or classmethod too, or a wrapt wrapper
    around one of spectrace's wrappers)."""
    inner = getattr(obj, "__func__", obj)
    if isinstance(inner, wrapt.FunctionWrapper):
        inner = inner._self_wrapper
    return callable(inner) and hasattr(inner, "spectrace_hook")


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
