"""A process for tests/test_vllm_e2e_dflash.py, in the vLLM environment:
`spectrace.instrument()`, then vLLM's offline `LLM` on a tiny Qwen3 target with vLLM's
DFlash draft (`--speculative-config '{"method": "dflash", ...}'`, harness/tiny_models.py
pair `qwen3-dflash`, random weights), and vLLM's own speculative counters
(`LLM.get_metrics()`); prints `RESULT {json}`.

    VLLM_PYTHON tests/programs/vllm_dflash_llm.py MODELS_DIR OUTPUT_DIR PROMPTS_JSON
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    import spectrace
    # before vLLM is imported, as a user's script would
    spectrace.instrument(output_dir=sys.argv[2], metric_interval_s=0.5, agreement_every=1)
    from vllm import LLM, SamplingParams

    models = sys.argv[1]
    llm = LLM(model=f"{models}/target", dtype="float32", enforce_eager=True, max_model_len=256,
              max_num_seqs=4, max_num_batched_tokens=256, disable_log_stats=False,
              speculative_config={"method": "dflash", "model": f"{models}/draft",
                                  "num_speculative_tokens": 3})
    outs = llm.generate([{"prompt_token_ids": p} for p in json.loads(sys.argv[3])],
                        SamplingParams(max_tokens=16, temperature=0, ignore_eos=True))
    counters = {}
    for m in llm.get_metrics():
        if m.name.startswith("vllm:spec_decode") and hasattr(m, "value"):
            counters[m.name] = m.value
        elif m.name.startswith("vllm:spec_decode") and hasattr(m, "values"):
            counters.update({f"{m.name}[{i}]": v for i, v in enumerate(m.values)})
    time.sleep(2)  # two metric exports after the last step
    print("RESULT", json.dumps({"tokens": [list(o.outputs[0].token_ids) for o in outs],
                                "vllm": counters}), flush=True)


if __name__ == "__main__":  # vLLM's spawned processes import this module again
    main()
