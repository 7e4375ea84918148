"""Watching a draft model's own `load_weights` run, without changing what it loads.

SGLang and vLLM load a draft the same way: `load_weights(weights)` iterates over
(checkpoint key, tensor) pairs and calls each target parameter's `weight_loader(param,
tensor[, shard_id])` (or the module's `default_weight_loader`). A key during which no
loader ran was dropped. The observer hands the runtime the very same pairs, counts the
loader calls per parameter and shard while the runtime's code runs, and puts every
loader back afterwards.
"""
from __future__ import annotations

from typing import Callable

from ..safety import INTERNAL_ERRORS


class LoadObserver:
    """One `load_weights` call: which keys reached a parameter loader, and which parameters
    (and shards of stacked ones) were loaded."""

    IGNORED_KEYS = ("d2t", "t2d")  # consumed without a parameter, by design

    def __init__(self, model, module, deferred: Callable[[str, set], bool] | None = None):
        """`deferred(key, loaded_names)`: True for a key the runtime holds back and loads
        later fused with another one (it counts as used once that load happened)."""
        self.model = model
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.loaded: dict[str, set] = {}
        self.unused: list[str] = []
        self.seen = 0
        self._held: list[str] = []
        self._deferred = deferred
        self._hit = False
        self._restore: list = []
        for p in model.parameters():
            orig = getattr(p, "weight_loader", None)
            if orig is not None:
                self._restore.append((p, "weight_loader", orig))
                p.weight_loader = self._counting(orig)
        orig_default = getattr(module, "default_weight_loader", None)
        if orig_default is not None:
            self._restore.append((module, "default_weight_loader", orig_default))
            module.default_weight_loader = self._counting(orig_default)

    def _counting(self, loader):
        def counted(param, *args, **kwargs):
            shard = args[1] if len(args) > 1 else kwargs.get(
                "loaded_shard_id", kwargs.get("shard_id"))
            name = self.names.get(id(param))
            if name is not None:
                self.loaded.setdefault(name, set()).add(shard)
            self._hit = True
            return loader(param, *args, **kwargs)
        return counted

    def iterate(self, weights):
        last = None
        for item in weights:
            self._settle(last)
            last = item[0]
            self._hit = False
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
        self.unused = [k for k in self._held
                       if self._deferred is None or not self._deferred(k, loaded)]

    def restore(self) -> None:
        for owner, attr, original in self._restore:
            setattr(owner, attr, original)
        self._restore.clear()


def load_weights_wrapper(hook: str, module, report, deferred=None):
    """A wrapt wrapper for `load_weights(weights)`: the runtime's loader runs once, on the
    same (key, tensor) pairs, and returns its own result; `report(model, observer)` runs
    afterwards. Any failure of spectrace's part is counted and leaves the load alone."""
    def wrapper(wrapped, instance, args, kwargs):
        observer = None
        try:
            observer = LoadObserver(instance, module, deferred)
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
    return wrapper
