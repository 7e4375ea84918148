"""The vLLM adapter's logic on the cases an end-to-end run on the tiny models does not
reach: mixed prefill/decode steps and trimmed outputs in the accept counts, deduplicated
or default aux ids, another speculative method, drafts trained without aux layers (no
false alarm), vLLM's collect-then-load `load_weights` seen by the load observer.

vLLM is not installed in this environment (it has its own, see tests/test_vllm_e2e.py,
where the same code runs on vLLM's real objects): the models here are stand-ins with the
attribute names vLLM's classes have (checked in the wheels by
tests/test_vllm_wrap_points.py); the Recorder, detectors and torch modules are real.
"""
from __future__ import annotations

import random
import types

import pytest
import torch

from tests.kit import stand_ins as hb

from tests.kit import process_state
from spectrace import signals as S
from spectrace.adapters import vllm_eagle3, vllm_target
from spectrace.adapters.load_observer import LoadObserver
from spectrace.adapters.vllm_engine import StepCounts

pytestmark = pytest.mark.torch


# -- a finished request ----------------------------------------------------------------------
def _request(rid, hist, temperature, sampling_type, priority=0, lora=None):
    """A stand-in for vLLM's `Request` with the attributes the hook reads (checked in the
    wheels: tests/test_vllm_wrap_points.py ATTRS)."""
    return types.SimpleNamespace(
        request_id=rid, priority=priority,
        spec_decode_metrics=None if hist is None else types.SimpleNamespace(histogram=hist),
        lora_request=None if lora is None else types.SimpleNamespace(lora_name=lora),
        sampling_params=types.SimpleNamespace(
            temperature=temperature, top_k=0,
            sampling_type=types.SimpleNamespace(name=sampling_type)))


@pytest.mark.parametrize("label,expected", [
    ("priority", {"2": 1, "0": 1}), ("lora", {"sql": 1, "none": 1}),
    ("routing_key", {"none": 2})])
def test_free_request_reads_vllms_own_counts_sampling_and_label(tmp_path, label, expected):
    from spectrace.adapters import vllm_engine
    with process_state.own_recorder(str(tmp_path), request_label=label, request_sample_ratio=0.0) as rec:
        sched = types.SimpleNamespace(vllm_config=None)
        # vLLM calls temperature 5e-6 greedy (its epsilon, 1e-5): so does spectrace here
        vllm_engine._before_free_request(sched, _request("a-0-x", [1, 3, 0, 2], 5e-6,
                                                         "GREEDY", priority=2, lora="sql"))
        vllm_engine._before_free_request(sched, _request("b-0-y", [0, 4, 0, 0], 0.7, "RANDOM"))
        vllm_engine._before_free_request(sched, _request("c-0-z", None, 0.7, "RANDOM"))
        vllm_engine._before_free_request(sched, _request("d-0-w", [0, 0, 0, 0], 0.7, "RANDOM"))
        req = rec.requests.totals
        req.fold()
        # a: 6 steps, 3 + 2*3 = 9 accepted (mean 2.5); b: 4 steps, 4 accepted (mean 2.0);
        # c (vLLM kept no counts) and d (no speculative step) are not counted
        assert req.by["sampling"].lengths == {("greedy", 1): 1, ("greedy", 2): 3, ("greedy", 4): 2,
                                   ("0.5<=t<1", 2): 4}
        by_label = {}
        for (bucket, value), n in req.by_mean_length.items():
            by_label[value] = by_label.get(value, 0) + n
        assert by_label == expected
        assert {b for b, _ in req.by_mean_length} == {"2.50-2.75", "2.00-2.25"}


# -- accept counts ---------------------------------------------------------------------------
def test_free_request_reads_its_first_scheduled_cache_hit_and_grammar(tmp_path):
    """The prefix-cache hit is the computed tokens a request was first scheduled with
    (`scheduled_new_reqs`, kept only while vLLM keeps per-request figures, popped when the
    request is freed); the grammar is its structured-output key's kind."""
    from spectrace.adapters import vllm_engine
    new = [types.SimpleNamespace(req_id="a", num_computed_tokens=96),
           types.SimpleNamespace(req_id="b", num_computed_tokens=0)]
    prefill = types.SimpleNamespace(scheduled_new_reqs=new, scheduled_spec_decode_tokens={})
    with process_state.own_recorder(str(tmp_path), request_sample_ratio=0.0) as rec:
        off = types.SimpleNamespace(vllm_config=None, spec_decode_metrics_level="none")
        vllm_engine._before_update(off, prefill, None)
        assert vllm_engine._FIRST_COMPUTED == {}  # vLLM keeps no per-request figure
        sched = types.SimpleNamespace(vllm_config=None, spec_decode_metrics_level="summary")
        vllm_engine._before_update(sched, prefill, None)
        again = types.SimpleNamespace(scheduled_new_reqs=new[:1], scheduled_spec_decode_tokens={})
        new[0].num_computed_tokens = 128  # a resumption later: the first scheduling counts
        vllm_engine._before_update(sched, again, None)
        a = _request("a", [0, 3, 0, 0], 0.0, "GREEDY")
        a.num_prompt_tokens = 120
        a.structured_output_request = types.SimpleNamespace(
            structured_output_key=(types.SimpleNamespace(name="JSON"), "{}"))
        b = _request("b", [0, 2, 0, 0], 0.0, "GREEDY")
        b.num_prompt_tokens, b.structured_output_request = 120, None
        vllm_engine._before_free_request(sched, a)
        vllm_engine._before_free_request(sched, b)
        assert vllm_engine._FIRST_COMPUTED == {}  # freed with the requests
        req = rec.requests.totals
        req.fold()
        assert req.by["prefix_cache"].lengths == {(">=50%", 2): 3, ("none", 2): 2}
        assert req.by["grammar"].lengths == {("json", 2): 3, ("none", 2): 2}


def test_step_counts_fast_path_equals_vllms_rule():
    """A pure decode step (every request drafted and answered) takes the C path; its
    counts are vLLM's `len(sampled) - 1` per request, like the per-request path's."""
    rng = random.Random(0)
    for bs in (1, 7, 256):
        reqs = [f"r{i}" for i in range(bs)]
        spec = {r: [1, 2, 3] for r in reqs}
        index = {r: i for i, r in enumerate(rng.sample(reqs, bs))}
        lens = [rng.randint(1, 4) for _ in range(bs)]
        counts = StepCounts(spec, index, lens, 1)
        expected = [lens[index[r]] - 1 for r in reqs]
        assert sorted(counts) == sorted(expected) == sorted(counts._per_request())


def test_step_counts_skip_what_vllm_skips():
    """Requests without drafts (prefill in the same step), with no tokens back, or missing
    from the output are not request-steps; a pooling model samples no bonus token."""
    spec = {"a": [1, 2, 3], "b": [], "c": [4, 5, 6], "gone": [7, 8, 9]}
    index = {"a": 0, "b": 1, "c": 2, "p": 3}
    assert list(StepCounts(spec, index, [3, 1, 0, 1], 1)) == [2]
    assert list(StepCounts({"a": [1, 2, 3]}, {"a": 0}, [3], 0)) == [3]


def test_step_counts_fold_into_the_recorders_totals(tmp_path):
    with process_state.own_recorder(str(tmp_path)) as rec:
        spec = {"a": [1, 2, 3], "b": [1, 2, 3]}
        rec.acceptance.add(StepCounts(spec, {"a": 0, "b": 1}, [2, 4], 1), 3)
        rec.acceptance.add(StepCounts(spec, {"a": 1, "b": 0, "x": 2}, [1, 1, 9], 1), 3)
        rec.acceptance.totals.fold()
        acc = rec.acceptance.totals
        assert (acc.drafts, acc.draft_tokens, acc.accepted) == (4, 12, 4)
        assert acc.per_position == [2, 1, 1] and acc.length_counts == {1: 2, 2: 1, 4: 1}


def test_vllms_own_stats_fold_to_the_same_totals(tmp_path):
    """The two sources of accept counts (vLLM's per-step `SpecDecodingStats` when it logs
    stats, the per-request lengths when it does not) give the same totals, accept-length
    distribution included (derived from the cumulative per-position counts)."""
    from spectrace.families.acceptance import AcceptanceTotals, PositionCounts
    by_request, by_position = AcceptanceTotals(), AcceptanceTotals()
    for accepted in hb.accept_lists(37, n=20, seed=3):
        reqs = {f"r{i}": [1, 2, 3] for i in range(len(accepted))}
        index = {r: i for i, r in enumerate(reqs)}
        by_request.add(StepCounts(reqs, index, [a + 1 for a in accepted], 1), 3)
        by_position.add_positions(PositionCounts(
            len(accepted), 3 * len(accepted), [sum(a > p for a in accepted) for p in range(3)]))
    by_request.fold()
    by_position.fold()
    for field in ("drafts", "draft_tokens", "accepted", "per_position", "length_counts"):
        assert getattr(by_request, field) == getattr(by_position, field), field


# -- context length ----------------------------------------------------------------------------
def _cached(lengths: dict):
    """vLLM's `CachedRequestData`'s two lists the hook reads (checked in the wheels)."""
    return types.SimpleNamespace(req_ids=list(lengths), num_computed_tokens=list(lengths.values()))


def test_step_context_pairs_each_count_with_the_schedulers_token_count():
    """Counts and lengths aligned request by request (in the scheduler's order, whatever the
    runner's index order), the same requests skipped as for the counts; a length is the
    computed tokens plus the last sampled one, -1 for a request the cached data lacks."""
    spec = {"a": [1, 2, 3], "b": [], "c": [4, 5, 6], "d": [7, 8, 9], "gone": [1, 1, 1]}
    index = {"d": 0, "c": 1, "a": 2, "b": 3}
    step = StepCounts(spec, index, [4, 1, 2, 1], 1, _cached({"a": 99, "c": 1500, "b": 7}))
    assert step.context() == ([1, 0, 3], [100, 1501, -1])
    assert sorted(step) == sorted(step.context()[0])
    # vLLM logging stats: its own lists, read at fold time
    lazy = StepCounts(spec, index, None, 1, _cached({"a": 99, "c": 1500, "d": 3}),
                      sampled=[[5] * 4, [5], [5, 5], [5]])
    assert lazy.context() == ([1, 0, 3], [100, 1501, 4])


def _by_context(rec) -> dict:
    rec.acceptance.totals.fold()
    return rec.acceptance.totals.by["context"].lengths


def test_context_from_step_counts_when_vllm_logs_no_stats(tmp_path):
    with process_state.own_recorder(str(tmp_path)) as rec:
        spec = {"a": [1, 2, 3], "b": [1, 2, 3], "c": [1, 2, 3]}
        step = StepCounts(spec, {"a": 0, "b": 1, "c": 2}, [2, 4, 1], 1,
                          _cached({"a": 100, "b": 1100}))
        rec.acceptance.add(step, 3, step.context)
        assert _by_context(rec) == {("<512", 2): 1, ("1k-2k", 4): 1, ("unknown", 1): 1}
        assert rec.acceptance.totals.drafts == 3


def test_context_with_vllms_own_stats(tmp_path):
    """vLLM logging stats: a step whose requests share a bucket counts vLLM's own
    per-position counts there (so a list vLLM trimmed when its request stopped does not
    matter); a step mixing buckets counts each request's sampled tokens."""
    from spectrace.adapters import vllm_engine
    from spectrace.families.acceptance import PositionCounts
    with process_state.own_recorder(str(tmp_path)) as rec:
        spec = {"a": [1, 2, 3], "b": [1, 2, 3]}
        # one bucket: "b" stopped after its first token, vLLM counted its 3 accepted
        one = StepCounts(spec, {"a": 0, "b": 1}, None, 1, _cached({"a": 100, "b": 200}),
                         sampled=[[5, 5], [5]])
        rec.acceptance.add_positions(PositionCounts(2, 6, [2, 1, 1]), one.context)
        mixed = StepCounts(spec, {"a": 0, "b": 1}, None, 1, _cached({"a": 100, "b": 5000}),
                           sampled=[[5, 5], [5, 5, 5]])
        rec.acceptance.add_positions(PositionCounts(2, 6, [2, 1, 0]), mixed.context)
        assert _by_context(rec) == {("<512", 2): 2, ("<512", 4): 1, ("4k-8k", 3): 1}
        # through the hooks: update_from_output keeps the references, make_stats pairs them
        sched = types.SimpleNamespace(vllm_config=None, num_spec_tokens=3, log_stats=True,
                                      num_sampled_tokens_per_step=1)
        out = types.SimpleNamespace(scheduled_spec_decode_tokens=spec,
                                    num_scheduled_tokens={"a": 4, "b": 4},
                                    scheduled_cached_reqs=_cached({"a": 1100, "b": 1200}))
        result = types.SimpleNamespace(sampled_token_ids=[[5], [5, 5, 5, 5]],
                                       req_id_to_index={"a": 0, "b": 1})
        vllm_engine._before_update(sched, out, result)
        vllm_engine._before_make_stats(sched, types.SimpleNamespace(
            num_drafts=2, num_draft_tokens=6, num_accepted_tokens_per_pos=[1, 1, 1]))
        assert rec.inflight.seq_lens is None
        got = _by_context(rec)
        assert (got[("1k-2k", 1)], got[("1k-2k", 4)]) == (1, 1)
        assert sum(got.values()) == rec.acceptance.totals.drafts == 6


# -- the aux audit and widths ------------------------------------------------------------------
def target(ids, num_layers=4):
    """Shaped like vLLM's `LlamaForCausalLM`: the decoder (`.model`, an EagleModelMixin)
    keeps `aux_hidden_state_layers` (empty until the runner sets them)."""
    decoder = types.SimpleNamespace(aux_hidden_state_layers=tuple(ids),
                                    layers=[None] * num_layers)
    return types.SimpleNamespace(model=decoder, config=types.SimpleNamespace())


class Eagle3LlamaForCausalLM:
    """Shaped like vLLM's draft class: config, and `.model` with fc only when the config's
    `use_aux_hidden_state` is on (the name is what `is_eagle3_draft` checks)."""

    def __init__(self, aux=True, ids=(0, 1, 2), top_level=False, hidden=128) -> None:
        eagle = {} if top_level else {"eagle_aux_hidden_state_layer_ids": list(ids)}
        self.config = types.SimpleNamespace(hidden_size=hidden, eagle_config=eagle,
                                            vocab_size=512, draft_vocab_size=256)
        if top_level:
            self.config.eagle_aux_hidden_state_layer_ids = list(ids)
        inner = types.SimpleNamespace(use_aux_hidden_state=aux)
        if aux:
            inner.fc = torch.nn.Linear(3 * hidden, hidden, bias=False, device="meta")
            inner.fc.input_size = 3 * hidden
        self.model = inner


def codes(findings) -> list[str]:
    return sorted(f.code for f in findings)


@pytest.mark.parametrize("ids,top_level", [((0, 1, 2), False), ((0, 1, 2), True)])
def test_healthy_pair_has_no_findings(ids, top_level):
    draft = Eagle3LlamaForCausalLM(ids=ids, top_level=top_level)
    assert vllm_target.audit_pair(target(ids), draft, "eagle3") == []


def test_duplicate_ids_collapse_to_fewer_layers():
    """vLLM >= 0.30 keeps `sorted(set(ids))`: a draft naming [1, 1, 2] gets two layers
    where its fc expects three."""
    found = vllm_target.audit_pair(target((1, 2)), Eagle3LlamaForCausalLM(ids=(1, 1, 2)))
    assert codes(found) == [S.AUX_COUNT_MISMATCH]
    assert "stores aux_hidden_state_layers [1, 2]" in found[0].message


def test_ids_the_runtime_ignored_are_a_warning():
    """vLLM < 0.22 ignores ids nested in eagle_config and captures its defaults."""
    defaults = (2, 16, 29)  # (2, L // 2, L - 3) of a 32-layer target
    [f] = vllm_target.audit_pair(target(defaults, 32), Eagle3LlamaForCausalLM(ids=(0, 1, 2)))
    assert f.code == S.AUX_ID_MISMATCH and f.severity == "warning"
    assert "set_aux_hidden_state_layers" in f.message


@pytest.mark.parametrize("method,cause", [("eagle3", "use_aux_hidden_state"),
                                          ("eagle", '"method": "eagle3"')])
def test_capture_off_names_the_cause(method, cause):
    """A draft with fc whose target captures nothing: the config switch, or a method other
    than eagle3 (vLLM then does not even call combine_hidden_states)."""
    [f] = vllm_target.audit_pair(target(()), Eagle3LlamaForCausalLM(), method)
    assert f.code == S.AUX_CAPTURE_DISABLED and cause in f.message and "vLLM" in f.message


def test_draft_without_trained_fc_is_not_judged(tmp_path):
    """A draft with aux off whose checkpoint has no fc was never trained on aux layers:
    neither the audit nor the width hook raises anything (a false alarm is as bad as a
    miss). With a trained fc vLLM did not build, the same width is an fc bypass."""
    draft = Eagle3LlamaForCausalLM(aux=False)
    assert vllm_target.audit_pair(target(()), draft) == []
    assert vllm_eagle3.expected_widths(draft) is None
    hidden = torch.empty(4, 128, device="meta")
    with process_state.own_recorder(str(tmp_path)) as rec:
        vllm_eagle3._before_combine(draft, hidden)
        assert rec.draft.counts == {("target_fed", 128): 1} and rec.findings.counts == {}
        trained = Eagle3LlamaForCausalLM(aux=False)
        from spectrace.adapters import draft_checks
        draft_checks.state(trained).checkpoint_fc_in = 384
        vllm_eagle3._before_combine(trained, hidden)
        assert rec.findings.counts == {S.FC_BYPASS: 1}
        assert codes(vllm_target.audit_pair(target(()), trained)) == [S.AUX_CAPTURE_DISABLED]


# -- vLLM's load_weights, as the observer sees it -----------------------------------------------
class TinyDraft(torch.nn.Module):
    """A draft whose `load_weights` works as vLLM's EAGLE-3 ones do: collect every
    (name, tensor) first, drop some by name (t2d; fc when aux is off), then hand each kept
    tensor to its parameter's `weight_loader`; stacked q/k/v arrive with a `shard_id`
    attribute on the tensor (vLLM 0.32's WeightsMapper)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Parameter(torch.zeros(6, 2))
        self.norm = torch.nn.Parameter(torch.zeros(2))
        for p in (self.qkv, self.norm):
            p.weight_loader = lambda param, w, shard=None: None

    def load_weights(self, weights):
        kept = {n: t for n, t in weights if "t2d" not in n and not n.startswith("fc.")}
        for name, tensor in kept.items():
            if name.endswith("_proj.weight"):
                tensor.shard_id = name.split(".")[-2][0]
                self.qkv.weight_loader(self.qkv, tensor)
            elif name == "norm.weight":
                self.norm.weight_loader(self.norm, tensor)


def test_observer_links_keys_to_loads_by_tensor():
    model = TinyDraft()
    keys = ["q_proj.weight", "k_proj.weight", "v_proj.weight", "norm.weight", "fc.weight",
            "t2d", "extra.bias"]
    obs = LoadObserver(model, types.ModuleType("m"), by_tensor=True)
    model.load_weights(obs.iterate((k, torch.zeros(2, 3)) for k in keys))
    obs.restore()
    obs.finish()
    assert obs.unused == ["fc.weight", "extra.bias"] and obs.seen == len(keys)
    assert obs.loaded == {"qkv": {"q", "k", "v"}, "norm": {None}}
    assert obs.shapes["fc.weight"] == (2, 3)


# -- DFlash / DSpark drafts, parallel drafting ----------------------------------------------------
class DFlashQwen3ForCausalLM(Eagle3LlamaForCausalLM):
    """Shaped like vLLM's DFlash draft: fc on `.model`, its ids in `dflash_config` as layer
    outputs (the name is what `is_dflash_draft` checks)."""

    def __init__(self, target_layer_ids=(0, 1, 2), eagle_config=None) -> None:
        super().__init__()
        self.config.eagle_config = eagle_config
        self.config.dflash_config = {"target_layer_ids": list(target_layer_ids)}


def test_dflash_ids_are_layer_outputs():
    """vLLM's runner captures `target_layer_ids` + 1 for DFlash (its
    `_get_eagle3_aux_layers_from_config`); an `eagle_config` with ids overrides them."""
    draft = DFlashQwen3ForCausalLM((0, 1, 2))
    assert vllm_target.draft_layer_ids(draft.config) == [1, 2, 3]
    assert vllm_target.audit_pair(target((1, 2, 3)), draft, "dflash") == []
    [f] = vllm_target.audit_pair(target((0, 1, 2)), draft, "dflash")
    assert f.code == S.AUX_ID_MISMATCH
    assert codes(vllm_target.audit_pair(target(()), draft, "dflash")) == [S.AUX_CAPTURE_DISABLED]
    over = DFlashQwen3ForCausalLM((0, 1, 2), {"eagle_aux_hidden_state_layer_ids": [4, 5, 6]})
    assert vllm_target.draft_layer_ids(over.config) == [4, 5, 6]


def test_drafts_without_fc_are_not_audited():
    """EAGLE-1 and MTP drafts read the target's last hidden state, not aux layers: no
    EAGLE-3 finding, whatever the target captures."""
    eagle1 = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=128),
                                   model=types.SimpleNamespace())
    for name in ("EagleLlamaForCausalLM", "DeepSeekMTP", "Qwen3_5MTP"):
        draft = type(name, (), {})()
        draft.__dict__.update(vars(eagle1))
        assert vllm_target.audit_pair(target(()), draft, "mtp") == []


def test_parallel_drafting_load_time_combine_is_not_a_pass(tmp_path):
    """PEagle combines its mask state (one vector of fc's input width) once at load: not
    a target-fed pass, so nothing is counted or judged; the first real pass is."""
    draft = Eagle3LlamaForCausalLM()
    with process_state.own_recorder(str(tmp_path)) as rec:
        vllm_eagle3._before_combine(draft, torch.empty(384, device="meta"))
        assert rec.draft.counts == {} and rec.findings.counts == {}
        vllm_eagle3._before_combine(draft, torch.empty(4, 128, device="meta"))
        assert rec.draft.counts == {("target_fed", 128): 1} and rec.findings.counts == {S.FC_BYPASS: 1}


def test_ids_kept_off_the_decoder_are_found():
    """Shapes of the classes that keep their ids elsewhere: Plamo3's decoder
    (`model.layers`, its own `layers` list), a wrapper's `language_model.model`, the
    Transformers backend's recorder switches."""
    kept = vllm_target.kept_ids
    plamo_decoder = torch.nn.Module()
    plamo_decoder.layers = torch.nn.ModuleList(torch.nn.Identity() for _ in range(4))
    plamo_decoder.aux_hidden_state_layers = (1, 2, 3)
    plamo = torch.nn.Module()
    plamo.model = torch.nn.Module()
    plamo.model.aux_hidden_state_layers = ()  # the EagleModelMixin default on its model
    plamo.model.layers = plamo_decoder
    assert kept(plamo) == vllm_target.KeptIds([1, 2, 3], 4, "model.layers")
    hf = types.SimpleNamespace(
        _output_aux_hidden_states_kwargs={"output_aux_hidden_state_3": True,
                                          "output_aux_hidden_state_1": True},
        model=types.SimpleNamespace(), config=types.SimpleNamespace(num_hidden_layers=6))
    assert kept(hf) == vllm_target.KeptIds([3, 1], 6, "")
    hf._output_aux_hidden_states_kwargs = {}
    assert kept(hf).ids == []


# -- step cost ---------------------------------------------------------------------------------
def test_step_cost_measures_every_nth_speculative_step(tmp_path):
    """Every 2nd step with drafts to verify is measured: step, verify (`execute_model`),
    draft (`propose_draft_token_ids`) and the time between steps, by the requests scheduled
    and the runner's K as the step starts; a step without drafts (prefill) neither counts
    nor is measured, and clears the between-steps interval; a measured step that
    `execute_model` ends itself (an output, so no `sample_tokens`) is dropped."""
    from spectrace.adapters import vllm_runner
    with process_state.own_recorder(str(tmp_path), step_cost_every=2) as rec:
        step = hb.VllmStep(5, "spectrace")
        runner = step.engine.runner
        try:
            for _ in range(3):  # steps 1 and 3 measured, 1 with the time until step 2
                step()
            assert rec.inflight.last_end is not None  # step 3's end
            prefill = types.SimpleNamespace(scheduled_spec_decode_tokens={},
                                            num_scheduled_tokens={"r": 9})
            runner.execute_model(prefill)  # not counted, and no between-steps time
            assert rec.inflight.last_end is None and rec.inflight.cost is None
            step()  # 4th: not measured
            runner.num_spec_tokens = 2
            step()  # 5th: measured at K 2
            step()  # 6th: not measured (5th's between-steps time ends here)
            so = step.inputs.steps[0][0]
            ctx = vllm_runner._before_execute(runner, so)  # 7th: measured ...
            assert ctx is not None and rec.inflight.cost is not None
            vllm_runner._after_execute(ctx, runner, "intermediate tensors")  # ... dropped
            assert rec.inflight.cost is None
            runner.sample_tokens(None)  # vLLM's pipeline stage: nothing to end
        finally:
            step.close()
        got = {(k.phase, k.bucket, k.num_steps): n for k, _, _, n, *_ in rec.cost.rows()}
        phases = ("step", "verify", "draft", "target_forward")
        assert got == {**{(p, "4-7", hb.STEPS): 2 for p in phases},
                       **{(p, "4-7", 2): 1 for p in phases},
                       ("between_steps", "4-7", hb.STEPS): 1, ("between_steps", "4-7", 2): 1}
        sec = {(k.phase, k.num_steps): s for k, s, _, _, *_ in rec.cost.rows()}
        for k in (2, hb.STEPS):
            assert 0 < sec[("verify", k)] + sec[("draft", k)] <= sec[("step", k)]
            assert 0 < sec[("target_forward", k)] <= sec[("verify", k)]
        # the forward's tokens: the step's scheduled tokens (5 requests x 4), its requests
        fwd = {r.key.num_steps: r for r in rec.cost.rows() if r.key.phase == "target_forward"}
        assert (fwd[hb.STEPS].tokens, fwd[hb.STEPS].requests) == (2 * 20, 2 * 5)


# -- the V2 model runner (MRV2) ------------------------------------------------------------------
def test_mrv2_step_cost_measures_every_nth_speculative_step(tmp_path):
    """MRV2 (`vllm_mrv2`, on the test kit's stand-ins of its runner, rejection sampler and
    speculator): every 2nd step with drafts is measured, `draft` being the speculator's
    `propose` and `target_forward` from vLLM's forward-start mark to `execute_model`'s end; K is the runner's `num_speculative_steps`; a warm-up dummy run (no drafts
    scheduled) neither counts nor is measured and clears the between-steps interval, and
    its `propose` records nothing."""
    with process_state.own_recorder(str(tmp_path), step_cost_every=2, agreement_every=0) as rec:
        step = hb.VllmStep(5, "spectrace", runner="mrv2")
        runner = step.engine.runner
        try:
            for _ in range(3):  # steps 1 and 3 measured
                step()
            assert rec.inflight.last_end is not None
            dummy = types.SimpleNamespace(scheduled_spec_decode_tokens={},
                                          num_scheduled_tokens={"_dummy_req_0": 4})
            runner.execute_model(dummy, dummy_run=True)
            runner.speculator.propose(None, None, None, None, None, None, None, None, None,
                                      None, None, dummy_run=True)
            assert rec.inflight.last_end is None and rec.inflight.cost is None
            step()  # 4th: not measured
            runner.num_speculative_steps = 2
            step()  # 5th: measured at K 2
        finally:
            step.close()
        got = {(k.phase, k.bucket, k.num_steps): n for k, _, _, n, *_ in rec.cost.rows()}
        phases = ("step", "verify", "target_forward", "draft")
        assert got == {**{(p, "4-7", hb.STEPS): 2 for p in phases},
                       **{(p, "4-7", 2): 1 for p in phases},
                       ("between_steps", "4-7", hb.STEPS): 1}


def _mrv2_batch(per_request: list, rows: int | None = None):
    """An MRV2 `InputBatch`'s fields the agreement reads, for requests with
    `per_request` drafts each: the verify input at the logits rows is the last sampled
    token (9) then drafts 1, 2, ...; the target's argmax at a request's row j is j + 1, the
    draft at its row j + 1: every draft agrees. `rows`: fewer logits rows (compacted)."""
    ids, argmax = [], []
    for k in per_request:
        ids += [9] + list(range(1, k + 1))
        argmax += list(range(1, k + 2))
    n = rows if rows is not None else len(ids)
    logits = torch.zeros(n, 16)
    logits[torch.arange(n), torch.tensor(argmax[:n])] = 1.0
    batch = types.SimpleNamespace(
        num_reqs=len(per_request), num_draft_tokens=sum(per_request),
        num_draft_tokens_per_req=per_request, input_ids=torch.tensor(ids, dtype=torch.int32),
        logits_indices=torch.arange(len(ids)))
    return logits, batch


def test_mrv2_agreement_compares_only_steps_of_one_k(tmp_path):
    """The rejection sampler's hook compares the target's argmax at row k with the draft
    at row k + 1 (here all agree) on every Nth step that verifies drafts, when every
    request verifies the same K with one bonus row each; a step mixing K's, one whose
    rows were compacted (adaptive verification) or without drafts is counted towards N
    but not compared."""
    from spectrace.adapters import vllm_mrv2
    sampler = types.SimpleNamespace()
    with process_state.own_recorder(str(tmp_path), agreement_every=2) as rec:
        for per_request, rows in (([3, 3], None), ([3, 3], None),    # 1st compared
                                  ([3, 2], None), ([3, 3], None),    # mixed: not compared
                                  ([3, 3], 6), ([3, 3], None),       # compacted: not
                                  ([2, 2, 2], None)):                # K 2: compared
            logits, batch = _mrv2_batch(per_request, rows)
            vllm_mrv2._before_rejection_sample(sampler, logits, batch)
        none = types.SimpleNamespace(num_reqs=2, num_draft_tokens=0,
                                     num_draft_tokens_per_req=None)
        vllm_mrv2._before_rejection_sample(sampler, torch.zeros(2, 16), none)  # 8th: none
        rec.agreement.fold()
        assert rec.agreement.drafts == 2 + 3 and rec.agreement.per_position == [5, 5, 2]
        # a draft that differs from the target's argmax disagrees at its position
        logits, batch = _mrv2_batch([3, 3])
        batch.input_ids[2] = 7  # request 0's second draft
        vllm_mrv2._before_rejection_sample(sampler, logits, batch)  # 9th: compared
        rec.agreement.fold()
        assert rec.agreement.per_position == [7, 6, 4]
