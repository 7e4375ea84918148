"""vLLM's default model runner as the doctor reads it (doctor.judge.vllm_runner), against
the released sources: `VllmConfig.use_v2_model_runner` and the architectures each release
lists, and the V2 runner reading only top-level ids (its `get_eagle3_aux_layers_from_config`)
while the V1 runner also takes `eagle_config`'s. What it changes in the findings:
tests/test_doctor_published.py (a misread of the V1 runner only is a warning)."""
from __future__ import annotations

import ast

import pytest

from spectrace.doctor.judge import vllm_runner as vr
from tests import release_sources as rs

CONFIG = "vllm/config/vllm.py"
V2_IDS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
V1_IDS = "vllm/v1/worker/gpu_model_runner.py"
DENSE = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32}
MOE = {"architectures": ["DeepseekV3ForCausalLM"], "n_routed_experts": 256}
QWEN3 = {"architectures": ["Qwen3ForCausalLM"]}


def test_default_runner_by_release_and_target():
    d = vr.default_runner
    assert d("0.20.0", QWEN3) == d("0.21.0", DENSE) == "V1"
    assert d("0.22.0", QWEN3) == "V2" and d("0.25.0", DENSE) == "V1"
    assert d("0.22.0", {**QWEN3, "quantization_config": {"quant_method": "fp8"}}) == "V1"
    assert d("0.26.0", DENSE) == "V2" and d("0.28.0", MOE) == "V1"
    assert d("0.28.0", {**MOE, "architectures": ["DeepseekV2ForCausalLM"]}) == "V2"
    assert d("0.29.0", MOE) == d("0.33.0", MOE) == "V2"
    # a multimodal target's experts are in its text_config
    assert vr.is_moe({"text_config": {"n_routed_experts": 384}})
    assert not vr.is_moe(DENSE) and not vr.is_moe({"num_local_experts": 0})


def _listed(version: str) -> frozenset[str] | None:
    for node in ast.parse(rs.source("vllm", version, CONFIG)).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == \
                "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES":
            return frozenset(ast.literal_eval(node.value.args[0]))
    return None


def _default_tail(version: str) -> str:
    """`use_v2_model_runner`'s body in that release ("" where it has none)."""
    src = rs.source("vllm", version, CONFIG) or ""  # 0.11 has no vllm/config/vllm.py
    start = src.find("def use_v2_model_runner")
    return "" if start < 0 else src[start:src.find("\n    def ", start + 10)]


@pytest.mark.sources
@pytest.mark.parametrize("version", rs.RELEASES["vllm"])
def test_the_runner_rules_are_each_releases(version):
    v = tuple(int(x) for x in version.split("."))
    body = _default_tail(version)
    if v < vr.V2_DEFAULT_FROM:
        assert "return True" not in body  # no V2 default
        return
    assert body.rstrip().endswith("return True")
    gated = "_is_default_v2_model_runner_model()" in body
    assert gated == (v < vr.V2_FOR_ALL_FROM), version
    if gated:
        assert _listed(version) == vr._listed(version), version
    # V2 reads the top-level ids only (then other methods' fields, never eagle_config's
    # eagle_aux_hidden_state_layer_ids); V1 falls back to eagle_config's
    v2 = rs.source("vllm", version, V2_IDS)
    fn = v2[v2.index("def get_eagle3_aux_layers_from_config"):]
    assert 'getattr(hf_config, "eagle_aux_hidden_state_layer_ids"' in fn or \
        "hf_config.eagle_aux_hidden_state_layer_ids" in fn
    assert 'get("eagle_aux_hidden_state_layer_ids")' not in fn
    v1 = rs.source("vllm", version, V1_IDS)
    body1 = v1[v1.index("def _get_eagle3_aux_layers_from_config"):]
    body1 = body1[:body1.index("\n    def ")]
    assert 'eagle_config.get("eagle_aux_hidden_state_layer_ids")' in body1


def test_the_runner_option():
    """`--vllm-runner default|v1|v2`: None (the release's default), V1 or V2; a bad value, a
    runtime other than vLLM, or V2 before it exists is a one-line ValueError (exit 2)."""
    o = vr.runner_option
    assert o(None, "vllm", "0.33.0") is None and o("default", "sglang", "0.5.23") is None
    assert o("v1", "vllm", "0.33.0") == "V1" and o(" V2 ", "vllm", "0.13.0") == "V2"
    assert o("v1", "vllm", "0.11.0") == "V1"
    for bad, rt, v, says in (("v3", "vllm", "0.33.0", "expected one of default, v1, v2"),
                             ("v1", "sglang", "0.5.23", "only vLLM"),
                             ("v2", "vllm", "0.11.0", "no V2 model runner")):
        with pytest.raises(ValueError, match=says):
            o(bad, rt, v)
    assert vr.judged_runner("0.33.0", MOE, None) == "V2"
    assert vr.judged_runner("0.33.0", MOE, "V1") == "V1"


def test_a_bad_runner_option_is_one_line_and_exit_2(tmp_path, capsys):
    from spectrace.doctor.cli import main
    assert main([str(tmp_path), "--target", str(tmp_path), "--runtime", "vllm==0.33.0",
                 "--vllm-runner", "v3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--vllm-runner 'v3'" in err and "Traceback" not in err


@pytest.mark.sources
@pytest.mark.parametrize("version", rs.RELEASES["vllm"])
def test_the_v2_runner_exists_from_0_13(version):
    """`VLLM_USE_V2_MODEL_RUNNER` (vllm/envs.py), the switch `--vllm-runner` stands for, and
    the V2 runner's spec-decode package exist from 0.13 on (`V2_EXISTS_FROM`)."""
    v = tuple(int(x) for x in version.split("."))
    envs = rs.source("vllm", version, "vllm/envs.py")
    assert ('"VLLM_USE_V2_MODEL_RUNNER"' in envs) == (v >= vr.V2_EXISTS_FROM), version


# -- the fc and aux-count checks' dependence on the runner ------------------------------------
V2_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
V1_FLAG = "vllm/v1/spec_decode/llm_base_proposer.py"


@pytest.mark.sources
@pytest.mark.parametrize("version", [v for v in rs.RELEASES["vllm"]
                                     if tuple(map(int, v.split("."))) >= (0, 18, 0)])
def test_which_runner_reads_use_aux_hidden_state(version):
    """The V1 runner switches aux capture off with eagle_config.use_aux_hidden_state: false
    (`_get_eagle3_use_aux_hidden_state_from_config`); the V2 runner captures the aux layers
    for every EAGLE-3 draft before 0.33 and reads the flag from 0.33
    (`requires_aux_hidden_states`): `v2_ignores_aux_flag`."""
    v = tuple(int(x) for x in version.split("."))
    v2 = rs.source("vllm", version, V2_RUNNER)
    reads = "requires_aux_hidden_states(" in v2
    assert reads == (v >= vr.V2_READS_AUX_FLAG_FROM) == (not vr.v2_ignores_aux_flag(version))
    if reads:
        utils = rs.source("vllm", version, V2_IDS)
        assert 'eagle_config.get("use_aux_hidden_state", True)' in utils
    else:
        assert "use_aux_hidden_state_outputs = True" in v2 and "eagle_config" not in v2
    v1 = rs.source("vllm", version, V1_FLAG) or rs.source("vllm", version,
                                                           "vllm/v1/spec_decode/eagle.py")
    assert 'eagle_config.get("use_aux_hidden_state", True)' in v1


def _capture_off(tmp_path, version, runner=None):
    from tests import test_doctor as td
    from spectrace.doctor import check_checkpoint
    draft = td.write_draft(tmp_path / "draft", td.draft_config("bypass"),
                           td.state_dict("bypass", "midlayer"))
    report = check_checkpoint(draft, td.write_target(tmp_path / "target"), version,
                              vllm_runner=runner)
    [f] = [f for f in report.findings if f.code == "aux.capture_disabled"]
    return f


@pytest.mark.torch  # writes a draft's tensors (tests/test_doctor.py)
def test_capture_off_names_the_runners_where_they_differ(tmp_path):
    f = _capture_off(tmp_path / "a", "vllm==0.28.0")
    assert f.severity == "error" and f.details["judged_runner"] == "V2"
    assert "That is the V1 model runner; vLLM 0.28.0's V2 model runner captures" in f.message
    assert "vLLM 0.28.0 runs this target on the V2 model runner by default" in f.message
    f = _capture_off(tmp_path / "b", "vllm==0.28.0", "v1")
    assert f.severity == "error" and "judged on the V1 model runner (--vllm-runner)" in f.message
    f = _capture_off(tmp_path / "c", "vllm==0.33.0")  # both runners read the flag
    assert "model runner" not in f.message and "judged_runner" not in f.details


@pytest.mark.torch  # writes a draft's tensors (tests/test_doctor.py)
def test_a_count_mismatch_of_the_v1_reading_says_so(tmp_path):
    """Top level empty, eagle_config ids: the count check takes the V1 runner's reading and
    says so (the V2 runner's default capture is what `aux.layer_ids_misread` compares)."""
    from tests import test_doctor as td
    cfg = td.draft_config("random")
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1]  # fc takes 3 layers
    for version, named in (("vllm==0.33.0", True), ("vllm==0.20.0", False),
                           ("sglang==0.5.23", False)):
        [f] = td.doctor(tmp_path / version, cfg=cfg, version=version).findings
        assert f.code == "aux.count_mismatch"
        assert ("on the V1 model runner, which takes eagle_config's ids" in f.message) == named
        assert f.details.get("ids_read_on") == ("V1" if named else None)
