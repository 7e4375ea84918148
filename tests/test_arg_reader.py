"""Hooks take the wrapped call's arguments by name (`patching.arg_reader`): positions come
from the real function's signature, resolved once when the wrap point is installed."""
from __future__ import annotations

import types

import pytest

from spectrace.patching import MissingParameter, Patcher, WrapPoint, arg_reader


class Worker:
    def step(self, batch, on_publish=None, *, grammar=None):
        return ("ran", batch, on_publish, grammar)

    @staticmethod
    def free(x, y=7):
        return x + y


def test_positional_keyword_and_default():
    read = arg_reader(Worker.step, ("batch", "on_publish", "grammar"), method=True).read
    assert read(("b", "p"), {}) == ("b", "p", None)
    assert read((), {"batch": "b", "grammar": "g"}) == ("b", None, "g")
    assert read(("b",), {"on_publish": "p"}) == ("b", "p", None)
    one = arg_reader(Worker.free, ("y",), method=False).read
    assert one((1,), {}) == (7,) and one((1, 2), {}) == (2,) and one((1,), {"y": 3}) == (3,)


def test_names_across_releases_and_a_missing_one():
    def old_step(self, model_worker_batch):
        return model_worker_batch
    read = arg_reader(old_step, (("batch", "model_worker_batch"),), method=True).read
    assert read(("mwb",), {}) == ("mwb",)
    with pytest.raises(MissingParameter, match="spec_info"):
        arg_reader(old_step, ("spec_info",), method=True)


def test_every_argument_by_name():
    read = arg_reader(Worker.step, "all", method=True).read
    assert read(("b",), {"grammar": "g"}) == ({"batch": "b", "grammar": "g"},)
    assert read((1, 2, 3), {"x": 1}) == ({"x": 1},)  # does not bind: the keywords alone


@pytest.mark.parametrize("reads", [(), ("batch",), ("batch", "grammar"),
                                   ("batch", "on_publish", "grammar"),
                                   ("grammar", "on_publish", "batch", "on_publish"), "all"])
def test_the_wrapper_hands_the_hook_the_same_values_as_the_reader(reads):
    """`guarded_wrapper` inlines up to three arguments; the values are `read`'s, whichever
    way the call passed them."""
    import wrapt
    from spectrace.safety import guarded_wrapper
    spec = arg_reader(Worker.step, reads, method=True)
    seen = []
    cls = type("Wrapped", (), {"step": Worker.step})
    wrapt.wrap_function_wrapper(cls, "step", guarded_wrapper(
        "t", before=lambda _w, *values: seen.append(values), reads=spec))
    w = cls()
    for args, kwargs in [(("b",), {}), (("b", "p"), {"grammar": "g"}), ((), {"batch": "B"})]:
        assert w.step(*args, **kwargs) == Worker.step(w, *args, **kwargs)
        assert seen.pop() == spec.read(args, kwargs)


def test_the_patcher_resolves_positions_and_notes_a_missing_parameter():
    seen = []
    mod = types.ModuleType("runtime_like")
    mod.Worker = type("Worker", (), {"step": Worker.step, "free": Worker.__dict__["free"]})
    p = Patcher()
    p.apply(mod, (WrapPoint("Worker.step", "t.step", before=lambda w, b, g: seen.append((b, g)),
                            reads=("batch", "grammar")),
                  WrapPoint("Worker.free", "t.free", before=lambda _, y: seen.append(y),
                            reads=("y",)),
                  WrapPoint("Worker.step", "t.absent", before=seen.append,
                            reads=("nothing_like_it",))))
    try:
        w = mod.Worker()
        assert w.step("b", grammar="g") == ("ran", "b", None, "g")
        assert mod.Worker.step(w, batch="B") == ("ran", "B", None, None)
        assert mod.Worker.free(1) == 8
        assert seen == [("b", "g"), ("B", None), 7]
        assert p.missing == ["runtime_like.Worker.step(nothing_like_it)"]
    finally:
        p.restore_all()
