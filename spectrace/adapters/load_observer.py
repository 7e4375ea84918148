"""Watching a draft model's own `load_weights` run, without changing what it loads.

SGLang and vLLM load a draft the same way: `load_weights(weights)` iterates over
(checkpoint key, tensor) pairs and calls each target parameter's `weight_loader(param,
tensor[, shard_id])` (or the module's `default_weight_loader`). The observer hands the
runtime the very same pairs, counts the loader calls per parameter and shard while the
runtime's code runs, and puts every loader back afterwards. Which key reached a loader:
SGLang loads each key as it reads it, so a key during which no loader ran was dropped;
vLLM's EAGLE-3 drafts first collect every pair, then load them, so there (`by_tensor`)
a key counts as loaded when a loader received its very tensor (the runtime holds every
tensor until it is done, so the ids stay unique).
"""
from __future__ import annotations

from typing import Callable

from ..safety import INTERNAL_ERRORS


class LoadObserver:
    """One `load_weights` call: which keys reached a parameter loader, and which parameters
    (and shards of stacked ones) were loaded."""

    IGNORED_KEYS = ("d2t", "t2d")  # consumed without a parameter, by design

    def __init__(self, model, module, deferred: Callable[[str, set], bool] | None = None,
                 by_tensor: bool = False, hook: str = "load_weights"):
        """`deferred(key, loaded_names)`: True for a key the runtime holds back and loads
        later fused with another one (it counts as used once that load happened).
        `by_tensor`: link keys to loader calls by tensor (see the module docstring).
        `hook`: the name a failure of the bookkeeping is counted under."""
        self.hook = hook
        self.model = model
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.loaded: dict[str, set] = {}
        self.unused: list[str] = []
        self.shapes: dict[str, tuple] = {}  # checkpoint key -> its tensor's shape
        self.seen = 0
        self._held: list[str] = []
        self._tensors: dict | None = {} if by_tensor else None  # id -> (key, tensor)
        self._reached: set[str] = set()  # keys whose tensor reached a loader
        self._deferred = deferred
        self._hit = False
        self._restore: list = []
        try:
            for p in model.parameters():
                orig = getattr(p, "weight_loader", None)
                if orig is not None:
                    self._restore.append((p, "weight_loader", orig))
                    p.weight_loader = self._counting(orig)
            for mod in module if isinstance(module, tuple) else (module,):
                orig_default = getattr(mod, "default_weight_loader", None)
                if orig_default is not None:
                    self._restore.append((mod, "default_weight_loader", orig_default))
                    mod.default_weight_loader = self._counting(orig_default)
        except BaseException:
            self.restore()  # put back the loaders swapped so far
            raise

    def _counting(self, loader):
        """`loader` wrapped: the runtime's loader runs once with its own arguments whatever
        spectrace's bookkeeping does (a failure there is counted, not raised)."""
        def counted(param, *args, **kwargs):
            try:
                self._count(param, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                INTERNAL_ERRORS.record(self.hook, exc)
            return loader(param, *args, **kwargs)
        return counted

    def _count(self, param, args, kwargs) -> None:
        tensor = args[0] if args else kwargs.get("loaded_weight")
        shard = args[1] if len(args) > 1 else kwargs.get(
            "loaded_shard_id", kwargs.get("shard_id", getattr(tensor, "shard_id", None)))
        name = self.names.get(id(param))
        if name is not None:
            self.loaded.setdefault(name, set()).add(shard)
        self._hit = True
        if self._tensors is not None:
            key = self._tensors.get(id(tensor))
            if key is not None:
                self._reached.add(key[0])

    def iterate(self, weights):
        """The runtime's (key, tensor) pairs, unchanged, noting each on the way."""
        last = None
        for item in weights:
            try:
                self._settle(last)
                last = item[0]
                self._hit = False
                shape = getattr(item[1], "shape", None)
                if shape is not None:
                    self.shapes[last] = tuple(shape)
                if self._tensors is not None:
                    self._tensors[id(item[1])] = item
            except Exception as exc:  # noqa: BLE001
                INTERNAL_ERRORS.record(self.hook, exc)
            yield item
        self._settle(last)

    def _settle(self, name) -> None:
        if name is None:
            return
        self.seen += 1
        if not self._hit and not any(k in name for k in self.IGNORED_KEYS):
            self._held.append(name)

    def finish(self) -> None:
        """Decide the keys no loader ran for while they were processed."""
        loaded = set(self.loaded)
        self.unused = [k for k in self._held if k not in self._reached
                       and (self._deferred is None or not self._deferred(k, loaded))]
        self._tensors = None  # let the runtime free the tensors

    def restore(self) -> None:
        for owner, attr, original in self._restore:
            setattr(owner, attr, original)
        self._restore.clear()


def load_weights_wrapper(hook: str, module, report, deferred=None, by_tensor: bool = False):
    """A wrapt wrapper for `load_weights(weights)`: the runtime's loader runs once, on the
    same (key, tensor) pairs, and returns its own result; `report(model, observer)` runs
    afterwards. Any failure of spectrace's part is counted and leaves the load alone.
    `module`: where the runtime's `default_weight_loader` is looked up (a module, or a
    tuple of them)."""
    def wrapper(wrapped, instance, args, kwargs):
        observer = None
        try:
            observer = LoadObserver(instance, module, deferred, by_tensor, hook)
            if args:
                args = (observer.iterate(args[0]),) + tuple(args[1:])
            else:
                kwargs = dict(kwargs, weights=observer.iterate(kwargs["weights"]))
        except Exception as exc:  # noqa: BLE001
            INTERNAL_ERRORS.record(hook, exc)
            if observer is not None:
                observer.restore()
                observer = None
        try:
            result = wrapped(*args, **kwargs)
        finally:
            if observer is not None:
                try:
                    observer.restore()
                except Exception as exc:  # noqa: BLE001
                    INTERNAL_ERRORS.record(hook, exc)
        if observer is not None:
            try:
                observer.finish()
                report(instance, observer)
            except Exception as exc:  # noqa: BLE001
                INTERNAL_ERRORS.record(hook, exc)
        return result
    wrapper.spectrace_hook = hook
    return wrapper
