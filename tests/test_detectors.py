"""The pure detectors (no SGLang, no tensors) and the draft-width hook's promise to read
shapes only."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from spectrace import signals
from spectrace.rules import aux
from spectrace.rules.aux import CaptureState, audit_aux_capture
from spectrace.rules.widths import ExpectedWidths, check_width, pass_kind

EXP = ExpectedWidths(fc_in=384, draft_hidden=128, target_hidden=128, num_aux=3)


@pytest.mark.parametrize("mode,kind", [
    ("EXTEND", "target_fed"), ("DRAFT_EXTEND", "target_fed"), ("DRAFT_EXTEND_V2", "target_fed"),
    ("MIXED", "target_fed"), ("DECODE", "draft_decode"), ("IDLE", "draft_decode")])
def test_pass_kind(mode, kind):
    assert pass_kind(mode) == kind


def test_expected_width_is_not_flagged():
    assert check_width("target_fed", 384, EXP) is None


def test_draft_decode_skipping_fc_is_by_design():
    assert check_width("draft_decode", 128, EXP) is None


def test_target_fed_pass_at_draft_width_is_fc_bypass():
    f = check_width("target_fed", 128, EXP)
    assert f.code == signals.FC_BYPASS and f.severity == "error"
    assert "use_aux_hidden_state" in f.message and "set_eagle3_layers_to_capture" in f.message
    assert f.details["width"] == 128 and f.details["fc_in"] == 384


def test_messages_name_the_runtime_that_ran():
    from spectrace.runtimes import VLLM
    from spectrace.rules.vocab import check_vocab_map
    f = check_width("target_fed", 128, EXP, VLLM)
    assert "vLLM skipped fc" in f.message and "set_aux_hidden_state_layers" in f.message
    [v] = check_vocab_map(None, 256, 512, runtime=VLLM)
    assert "vLLM maps draft id i" in v.message and "SGLang" not in v.message


def test_two_of_three_layers_is_width_mismatch():
    f = check_width("target_fed", 256, EXP)
    assert f.code == signals.WIDTH_MISMATCH
    assert "about 2 target layers" in f.message


def state(stored, rule=aux.PLUS_ONE, on=True, captured=None, num_layers=8):
    return CaptureState(on=on, stored=stored, num_layers=num_layers, rule=rule,
                        family="test.Family", captured=captured)


@pytest.mark.parametrize("rule,draft_ids,stored", [
    (aux.PLUS_ONE, [0, 1, 2], [1, 2, 3]),
    (aux.KEPT_UNLESS_FIRST_IS_ONE, [2, 30, 58], [2, 30, 58]),  # DeepSeek-V3, 61 layers
    (aux.KEPT_UNLESS_FIRST_IS_ONE, [1, 30, 58], [2, 31, 59]),
    (aux.KEPT_IF_MAX_IS_NUM_LAYERS, [3, 5, 8], [3, 5, 8]),
    (aux.KEPT_IF_MAX_IS_NUM_LAYERS, [3, 5, 7], [4, 6, 8]),
    (aux.PLUS_ONE, None, [2, 4, 5]),                           # defaults, 8 layers
    (aux.PLUS_ONE_DEFAULTS_TOO, None, [3, 5, 6]),
    (aux.KEPT, [0, 1, 2], [0, 1, 2]),                          # every vLLM target
    (aux.KEPT, None, [2, 4, 5]),
])
def test_each_rule_is_healthy_on_what_it_stores(rule, draft_ids, stored):
    n = 61 if stored[-1] > 8 else 8
    assert aux.stored_ids(rule, draft_ids, n) == stored
    assert audit_aux_capture(state(stored, rule, num_layers=n), draft_ids, 384, 128) == []


def test_aux_audit_capture_disabled_names_the_cause():
    [f] = audit_aux_capture(state(None, on=False), [0, 1, 2], 384, 128)
    assert f.code == signals.AUX_CAPTURE_DISABLED and "use_aux_hidden_state" in f.message
    [f] = audit_aux_capture(state(None, on=False), [0, 1, 2], 384, 128, algorithm="EAGLE")
    assert "--speculative-algorithm EAGLE3" in f.message


def test_aux_audit_count_and_id_mismatch():
    found = {f.code for f in audit_aux_capture(state([1, 3]), [0, 1, 2], 384, 128)}
    assert found == {signals.AUX_COUNT_MISMATCH, signals.AUX_ID_MISMATCH}
    [f] = audit_aux_capture(state([2, 3, 4]), [0, 1, 2], 384, 128)
    assert f.code == signals.AUX_ID_MISMATCH and f.severity == "warning"


def test_unknown_family_ids_are_not_judged():
    """A family without a rule: capture on and three layers is all the audit can say."""
    assert audit_aux_capture(state([7, 9, 11], rule=None), [0, 1, 2], 384, 128) == []


@pytest.mark.sglang
def test_width_hook_reads_shapes_only(tmp_path):
    """The real draft-forward hook on meta-device tensors, which have shapes but no data:
    any read of tensor data would raise. The model and ForwardBatch are minimal stand-ins
    (SGLang's need a distributed runtime); the ForwardMode enum is SGLang's own."""
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    import spectrace
    from spectrace.adapters import sglang_eagle3
    from spectrace.process import STATE

    spectrace.instrument(output_dir=str(tmp_path), exporters="file")
    try:
        model = SimpleNamespace(config=SimpleNamespace(hidden_size=128),
                                fc=torch.nn.Linear(384, 128, device="meta"),
                                hidden_size_in=128, num_aux_hidden_states=3)
        for mode, width in ((ForwardMode.EXTEND, 384), (ForwardMode.DECODE, 128),
                            (ForwardMode.EXTEND, 128)):
            hidden = torch.empty(5, width, device="meta")
            batch = SimpleNamespace(spec_info=SimpleNamespace(hidden_states=hidden),
                                    forward_mode=mode)
            sglang_eagle3._before_forward(model, batch)
        rec = STATE.recorder
        assert rec.draft.counts == {("target_fed", 384): 1, ("draft_decode", 128): 1,
                              ("target_fed", 128): 1}
        assert rec.findings.counts == {signals.FC_BYPASS: 1}
    finally:
        spectrace.uninstrument()


def test_message_catalogue_covers_every_finding_code():
    """spectrace.messages and the report rules' declarations (`judgement.SPECS`) hold the
    words of every finding code, and only those; each template names its facts (no
    positional or broken fields)."""
    import string

    from spectrace import messages
    from spectrace.families.findings import RUNTIME_SPECS
    from spectrace.report import judgement
    catalogue = [m for m in vars(messages).values() if isinstance(m, messages.Message)]
    catalogue += [s.message for s in judgement.SPECS.values() if s.message is not None]
    from spectrace.doctor.judge.codes import BY_CODE
    codes = ({s.code for s in RUNTIME_SPECS} | set(BY_CODE)
             | set(judgement.SPECS))
    assert {m.code for m in catalogue} == codes
    for m in catalogue:
        fields = {f for part in (m.text, m.fix) for _, f, _, _ in string.Formatter().parse(part)
                  if f is not None}
        assert all(f.isidentifier() for f in fields), (m.code, fields)
        rendered = m.render(**{f: f"<{f}>" for f in fields} | {"layers": 1.5})
        assert ("Fix: " in rendered) == bool(m.fix), m.code
