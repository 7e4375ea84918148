"""Hooks on SGLang's EAGLE-3 draft model (`sglang.srt.models.llama_eagle3`).

- `LlamaModel.forward`: width of `forward_batch.spec_info.hidden_states` and pass kind,
  read from shapes only (no tensor data, no device sync), checked for fc bypass.
- `LlamaForCausalLMEagle3.load_weights`: which checkpoint keys reached a parameter loader
  and which parameters were loaded, observed while SGLang's own loader runs; then the
  vocabulary map (`hot_token_id`) it built.
"""
from __future__ import annotations

import logging
import weakref

from .. import signals
from ..detectors.aux import audit_aux_capture
from ..detectors.widths import ExpectedWidths, check_width, pass_kind
from ..findings import ERROR, Finding
from ..instrumentation import STATE, recorder
from ..safety import INTERNAL_ERRORS, StrictModeError, guarded_wrapper

log = logging.getLogger("spectrace")
MAX_NAMES = 50  # names listed in one weights finding; the count is always complete

_expected: dict[int, ExpectedWidths] = {}
_kind_by_mode: dict = {}


def install(module, patcher) -> None:
    where = module.__name__
    model_cls = getattr(module, "LlamaModel", None)
    if model_cls is not None:
        patcher.wrap(model_cls, "forward",
                     guarded_wrapper("eagle3.forward", before=_before_forward),
                     f"{where}.LlamaModel")
    else:
        patcher.missing.append(f"{where}.LlamaModel")
    causal = getattr(module, "LlamaForCausalLMEagle3", None)
    if causal is not None:
        patcher.wrap(causal, "load_weights", _make_load_weights_wrapper(module),
                     f"{where}.LlamaForCausalLMEagle3")
    else:
        patcher.missing.append(f"{where}.LlamaForCausalLMEagle3")


# -- hidden-state widths ----------------------------------------------------------------
def expected_widths(model) -> ExpectedWidths:
    """fc.in_features, the draft hidden size, the target hidden size and the number of aux
    layers, from the module itself (attribute names differ across SGLang versions)."""
    cfg = model.config
    draft_hidden = int(cfg.hidden_size)
    target_hidden = int(getattr(model, "hidden_size_in", None)
                        or getattr(cfg, "target_hidden_size", None) or draft_hidden)
    fc_in = int(model.fc.in_features)
    num_aux = int(getattr(model, "num_aux_hidden_states", None)
                  or (fc_in // target_hidden if target_hidden else 3))
    return ExpectedWidths(fc_in, draft_hidden, target_hidden, num_aux)


# (id(model), ForwardMode, width) -> its pass key, for passes already checked and healthy:
# later ones are only counted. Only for models that can be weakly referenced, so that the
# entries go when the model does (an id can be reused by another object).
_healthy: dict = {}
_tracked: set[int] = set()


def _track(model) -> bool:
    i = id(model)
    if i in _tracked:
        return True
    try:
        weakref.finalize(model, _forget, i)
    except TypeError:  # not weakly referenceable: every pass takes the full check
        return False
    _tracked.add(i)
    return True


def _forget(i: int) -> None:
    _tracked.discard(i)
    _expected.pop(i, None)
    for key in [k for k in list(_healthy) if k[0] == i]:
        _healthy.pop(key, None)


def _before_forward(instance, args, kwargs):
    forward_batch = kwargs["forward_batch"] if "forward_batch" in kwargs else args[2]
    hidden = forward_batch.spec_info.hidden_states
    if hidden is None:
        return
    if hidden.is_cuda and _capturing():
        return  # CUDA-graph capture runs on dummy batches
    mode = forward_batch.forward_mode
    width = hidden.shape[-1]
    rec = STATE.recorder or recorder()
    key = _healthy.get((id(instance), mode, width))
    if key is not None:  # seen before and healthy: only count it
        passes = rec.passes
        passes[key] = passes.get(key, 0) + 1
        return
    kind = _kind_by_mode.get(mode)
    if kind is None:
        kind = _kind_by_mode[mode] = pass_kind(getattr(mode, "name", str(mode)))
    exp = _expected.get(id(instance))
    if exp is None:
        exp = _expected[id(instance)] = expected_widths(instance)
        rec.expected_width.update(exp.as_dict())
    width = int(width)
    rec.count_pass(kind, width)
    finding = check_width(kind, width, exp)
    if finding is None:
        if _track(instance):
            _healthy[(id(instance), mode, width)] = (kind, width)
        return
    rec.finding(finding, {"spectrace.forward_mode": getattr(mode, "name", str(mode))})
    if STATE.config.strict and finding.code == signals.FC_BYPASS:
        raise StrictModeError("spectrace strict mode (SPECTRACE_STRICT=1) stopped at the "
                              "first fc bypass: " + finding.message)


def _capturing() -> bool:
    import torch
    return torch.cuda.is_current_stream_capturing()


# -- weights and vocabulary map -----------------------------------------------------------
class LoadObserver:
    """Watches one `load_weights` call: counts, per checkpoint key, whether any parameter
    loader ran while SGLang processed it, and which parameters were loaded."""

    IGNORED_KEYS = ("d2t", "t2d")  # consumed without a parameter, by design

    def __init__(self, model, module) -> None:
        self.model = model
        self.module = module
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.loaded: set[int] = set()
        self.unused: list[str] = []
        self.seen = 0
        self._hit = False
        self._restore: list = []
        for p in model.parameters():
            orig = getattr(p, "weight_loader", None)
            if orig is not None:
                self._restore.append((p, orig))
                p.weight_loader = self._counting(orig)
        orig_default = getattr(module, "default_weight_loader", None)
        if orig_default is not None:
            self._restore.append((module, orig_default, "default_weight_loader"))
            module.default_weight_loader = self._counting(orig_default)

    def _counting(self, loader):
        def counted(param, *args, **kwargs):
            self.loaded.add(id(param))
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
            self.unused.append(name)

    def restore(self) -> None:
        for entry in self._restore:
            if len(entry) == 3:
                setattr(entry[0], entry[2], entry[1])
            else:
                entry[0].weight_loader = entry[1]
        self._restore.clear()

    def missing_params(self) -> list[str]:
        shared = {"model.embed_tokens.weight"}  # the eagle worker shares the target's
        if getattr(self.model, "load_lm_head_from_target", False):
            shared.add("lm_head.weight")
        return sorted(n for i, n in self.names.items() if i not in self.loaded and n not in shared)


def _make_load_weights_wrapper(module):
    def wrapper(wrapped, instance, args, kwargs):
        observer = None
        try:
            observer = LoadObserver(instance, module)
            if args:
                args = (observer.iterate(args[0]),) + tuple(args[1:])
            else:
                kwargs = dict(kwargs, weights=observer.iterate(kwargs["weights"]))
        except Exception as exc:  # noqa: BLE001
            INTERNAL_ERRORS.record("eagle3.load_weights", exc)
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
                    INTERNAL_ERRORS.record("eagle3.load_weights", exc)
        if observer is not None:
            try:
                _report_load(instance, observer)
            except Exception as exc:  # noqa: BLE001
                INTERNAL_ERRORS.record("eagle3.load_weights", exc)
        return result
    return wrapper


def weight_findings(unused: list[str], missing: list[str], seen: int) -> list[Finding]:
    out = []
    if unused:
        out.append(Finding(signals.WEIGHTS_UNUSED_KEYS, ERROR, (
            f"SGLang's load_weights dropped {len(unused)} of {seen} draft checkpoint keys that "
            f"match no parameter (e.g. {unused[0]}); those weights are not in the running "
            f"draft. A `layers.0.*` checkpoint on SGLang <= 0.5.8 (which expects "
            f"`midlayer.*`), or the reverse naming, is the usual cause: rename the keys for "
            f"this SGLang version, or run `spectrace doctor` on the checkpoint."),
            {"count": len(unused), "keys": unused[:MAX_NAMES]}))
    if missing:
        out.append(Finding(signals.WEIGHTS_MISSING_PARAMS, ERROR, (
            f"{len(missing)} draft parameters were not loaded by any checkpoint key (e.g. "
            f"{missing[0]}) and keep their random initial values; the draft's proposals "
            f"will rarely be accepted. Check the checkpoint's key names against this SGLang "
            f"version's LlamaForCausalLMEagle3."),
            {"count": len(missing), "params": missing[:MAX_NAMES]}))
    return out


def _report_load(model, obs: LoadObserver) -> None:
    rec = recorder()
    missing = obs.missing_params()
    rec.weights_report(len(obs.unused), len(missing))
    for f in weight_findings(obs.unused, missing, obs.seen):
        rec.finding(f)
    for f in vocab_findings(model):
        rec.finding(f)


def vocab_findings(model) -> list[Finding]:
    """Check the `hot_token_id` SGLang built from `d2t` (hot id i = i + d2t[i])."""
    from ..detectors.vocab import check_vocab_map
    cfg = model.config
    target_vocab = int(cfg.vocab_size)
    draft_vocab = int(getattr(cfg, "draft_vocab_size", None) or target_vocab)
    hot = getattr(model, "hot_token_id", None)
    offsets = None
    if hot is not None:
        ids = hot.detach().to("cpu").tolist()  # load time, small: not the decode path
        offsets = [h - i for i, h in enumerate(ids)]
    return check_vocab_map(offsets, draft_vocab, target_vocab)


# -- aux capture audit (called by the worker adapters once both models exist) -------------
def audit_models(target_model, draft_model) -> list[Finding]:
    inner = getattr(draft_model, "model", None)
    if inner is None or not hasattr(inner, "fc"):
        return []
    exp = expected_widths(inner)
    if getattr(target_model, "capture_aux_hidden_states", False):
        layers = getattr(getattr(target_model, "model", None), "layers_to_capture", None)
        captured = [int(i) - 1 for i in layers] if layers is not None else None
    else:
        captured = None
    eagle_cfg = getattr(draft_model.config, "eagle_config", None) or {}
    draft_ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids")
    return audit_aux_capture(captured, draft_ids, exp.fc_in, exp.target_hidden)
