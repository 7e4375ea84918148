"""The server settings read from the runtimes' own resolved config objects, for the
settings the CPU servers cannot run (an fp8 KV cache, a quantized target, tensor and
pipeline parallelism, attention DP, disaggregation, another grammar backend, CUDA graphs,
K by batch size): SGLang 0.5.23's ServerArgs resolved by its own pipeline
(`resolve_once`, what the scheduler receives) and vLLM 0.32's VllmConfig from its own
EngineArgs, each from the harness's server command line plus the settings, with no
server. The running servers are in tests/test_e2e_runtime_causes.py.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness.server import server_args
from tests.conftest import ROOT


@pytest.mark.sglang
def test_sglang_settings_from_the_server_args_sglang_resolved(tiny_models):
    from sglang.srt.server_args import prepare_server_args

    from spectrace.adapters import sglang_settings
    models = tiny_models("partial")
    base = server_args(models, 30000)
    at = base.index("--cuda-graph-backend-decode")
    graphs = base[:at] + base[at + 4:]  # SGLang's default graphs
    cases = [
        (base + ["--kv-cache-dtype", "fp8_e4m3", "--quantization", "fp8", "--tp-size", "2",
                 "--attn-dp-size", "2", "--disaggregation-mode", "prefill",
                 "--disable-radix-cache"],
         {"kv_cache_dtype": "fp8_e4m3", "draft_kv_cache_dtype": "fp8_e4m3",
          "quantization": "fp8", "draft_quantization": "fp8", "tp_size": 2,
          "attention_dp_size": 2, "disaggregation": "prefill", "prefix_caching": False,
          "cuda_graph": False, "spec_method": "EAGLE3", "spec_num_steps": 3, "spec_topk": 1,
          "spec_num_draft_tokens": 4}),
        (base + ["--speculative-draft-kv-cache-dtype", "bf16", "--kv-cache-dtype", "fp8_e5m2",
                 "--grammar-backend", "outlines", "--pp-size", "2"],
         {"kv_cache_dtype": "fp8_e5m2", "draft_kv_cache_dtype": "bf16", "pp_size": 2,
          "grammar_backend": "outlines", "quantization": "none", "disaggregation": "none",
          "async_scheduling": False, "spec_adaptive": False}),
        (graphs, {"cuda_graph": True, "prefix_caching": True}),
    ]
    for argv, want in cases:
        args = prepare_server_args(argv)
        args.resolve_once()
        got = sglang_settings.read(args)
        assert {k: got.get(k) for k in want} == want, (argv[-6:], got)
        # the largest decode graph batch as SGLang's own serialisation of what it resolved
        # (its /server_info) has it, where graphs run (SGLang raises a small
        # --cuda-graph-max-bs-decode for speculation: its value, not the flag's, is read)
        decode = args.resolved_dict()["cuda_graph_config"]["decode"]
        assert got.get("cuda_graph_max_bs") == (
            decode["max_bs"] if decode["backend"] != "disabled" else None), (decode, got)


@pytest.mark.vllm
def test_vllm_settings_from_the_config_vllm_resolved(tiny_models, tmp_path):
    from spectrace.chat_template import short_hash
    from tests.conftest import vllm_python_or_skip
    from harness.vllm_server import vllm_env
    python = vllm_python_or_skip()
    program = os.path.join(ROOT, "tests", "programs", "vllm_settings_config.py")
    models = tiny_models("partial")
    cases = [
        ({"args": ["--kv-cache-dtype", "fp8", "--no-enable-prefix-caching",
                   "--structured-outputs-config.backend", "guidance"]},
         {"kv_cache_dtype": "fp8", "draft_kv_cache_dtype": "fp8", "prefix_caching": False,
          "grammar_backend": "guidance", "quantization": "none", "cuda_graph": False,
          "async_scheduling": False, "disaggregation": "none", "tp_size": 1,
          "spec_method": "eagle3", "spec_num_steps": 3, "spec_adaptive": False,
          "spec_verification": "standard"}),
        ({"spec_extra": {"kv_cache_dtype": "fp8",
                         "num_speculative_tokens_per_batch_size": [[1, 2, 3], [3, 4, 1]]}},
         {"kv_cache_dtype": "auto", "draft_kv_cache_dtype": "fp8", "prefix_caching": True,
          "spec_adaptive": True, "spec_adaptive_config": "[[1, 2, 3], [3, 4, 1]]"}),
        # block verification (lossless; 0.26+): the method as vLLM resolved it
        ({"spec_extra": {"rejection_sample_method": "block"}},
         {"spec_verification": "block", "spec_adaptive": False}),
        ({"method": "ngram"}, {"spec_method": "ngram"}),
        # the tokenizer's own template (the engine does not see the API server's
        # --chat-template: the source says so)
        ({}, {"chat_template": "none, unless --chat-template"}),
        ({"models": "WITH_TEMPLATE"},
         {"chat_template": "tokenizer, unless --chat-template",
          "chat_template_hash": short_hash(TEMPLATE)}),
    ]
    env = vllm_env({"PYTHONPATH": ROOT})
    with_template = models_with_template(models, tmp_path / "m")
    for run, want in cases:
        if run.get("models") == "WITH_TEMPLATE":
            run = {**run, "models": with_template}
        done = subprocess.run([python, program, models, json.dumps(run)], env=env,
                              capture_output=True, text=True, timeout=600)
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        assert lines, done.stderr[-3000:]
        got = json.loads(lines[-1][len("RESULT "):])
        assert {k: got.get(k) for k in want} == want, (run, got)
        if run.get("method") == "ngram":  # no draft model: no draft quantization read
            assert "draft_quantization" not in got and got["draft_kv_cache_dtype"] == "auto"


@pytest.mark.sglang
def test_sglang_verification_and_adaptive_settings_from_the_server_args(tiny_models, tmp_path):
    """How SGLang 0.5.23 verifies drafts and what adaptive K follows, from the ServerArgs
    its own pipeline resolved: its default check, rejection sampling, accept thresholds
    below 1 (relaxed: lossy under sampling), adaptive K with SGLang's built-in table or a
    config file. Block verification is refused on CPU by SGLang's own checks ("only
    supports CUDA or ROCm"), so it is read from the arguments as parsed, not resolved."""
    from sglang.srt.server_args import prepare_server_args

    from spectrace.adapters import sglang_settings
    base = server_args(tiny_models("partial"), 30000)
    table = tmp_path / "k.json"  # SGLang reads and checks it while resolving
    table.write_text(json.dumps({"1": {"candidate_steps": [1, 3]}, "8": {"candidate_steps": [0]}}))
    cases = [
        ([], {"spec_verification": "standard", "spec_adaptive": False,
              "spec_adaptive_config": None}),
        (["--speculative-use-rejection-sampling"], {"spec_verification": "rejection sampling"}),
        (["--speculative-accept-threshold-single", "0.5"],
         {"spec_verification": "relaxed (accept threshold single 0.5, acc 1)"}),
        (["--speculative-accept-threshold-acc", "0.3"],
         {"spec_verification": "relaxed (accept threshold single 1, acc 0.3)"}),
        (["--speculative-adaptive"], {"spec_adaptive": True, "spec_adaptive_config": "built-in",
                                      "spec_verification": "standard"}),
        (["--speculative-adaptive", "--speculative-adaptive-config", str(table)],
         {"spec_adaptive": True, "spec_adaptive_config": str(table)}),
    ]
    for argv, want in cases:
        args = prepare_server_args(base + argv)
        args.resolve_once()
        got = sglang_settings.read(args)
        assert {k: got.get(k) for k in want} == want, (argv, got)
    with pytest.raises(ValueError, match="CUDA or ROCm"):
        prepare_server_args(base + ["--speculative-use-block-verification"]).resolve_once()
    # the arguments as parsed (SGLang's resolution is what refuses them on CPU)
    args = prepare_server_args(base + ["--speculative-use-block-verification"])
    assert sglang_settings.read(args)["spec_verification"] == "block"


# -- the chat template the server applies ------------------------------------------------------
TEMPLATE = ("{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{%- endfor %}\n")


def models_with_template(models: str, out) -> str:
    """A copy of the tiny pair whose target's tokenizer_config.json carries `TEMPLATE`
    (target copied, draft linked), in a folder `out`."""
    import shutil
    out.mkdir(parents=True)
    shutil.copytree(os.path.join(models, "target"), out / "target")
    os.symlink(os.path.join(models, "draft"), out / "draft")
    tc = out / "target" / "tokenizer_config.json"
    tc.write_text(json.dumps({**json.loads(tc.read_text()), "chat_template": TEMPLATE}))
    return str(out)


@pytest.mark.sglang
def test_sglang_chat_template_from_the_server_args(tiny_models, tmp_path):
    """What SGLang 0.5.23 renders chat requests with, from the ServerArgs it resolved: its
    --chat-template (a file: hashed; a registered name), else a registered template it
    guesses from the model path, else the tokenizer's own; none without any."""
    from sglang.srt.server_args import prepare_server_args

    from spectrace.adapters import sglang_settings
    from spectrace.chat_template import short_hash
    plain = tiny_models("partial")
    with_template = models_with_template(plain, tmp_path / "m")
    jinja = tmp_path / "served.jinja"
    jinja.write_text(TEMPLATE.replace("<|im_end|>", "<|eot_id|>"))
    vicuna = tmp_path / "vicuna-7b"  # SGLang's guess: vicuna_v1.1
    os.symlink(os.path.join(plain, "target"), vicuna)
    cases = [
        (server_args(plain, 30000), {"chat_template": "none"}),
        (server_args(with_template, 30000),
         {"chat_template": "tokenizer", "chat_template_hash": short_hash(TEMPLATE)}),
        (server_args(with_template, 30000) + ["--chat-template", str(jinja)],
         {"chat_template": "argument served.jinja",
          "chat_template_hash": short_hash(jinja.read_text())}),
        (server_args(with_template, 30000) + ["--chat-template", "chatml"],
         {"chat_template": "argument chatml"}),
        ([a if a != os.path.join(plain, "target") else str(vicuna)
          for a in server_args(plain, 30000)], {"chat_template": "model path vicuna_v1.1"}),
    ]
    for argv, want in cases:
        args = prepare_server_args(argv)
        args.resolve_once()
        got = sglang_settings.read(args)
        assert {k: v for k, v in got.items() if k.startswith("chat_template")} == want, \
            (argv[-2:], got)
    assert short_hash(TEMPLATE) != short_hash(jinja.read_text())
