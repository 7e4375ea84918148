"""A process for tests/test_vllm_e2e.py, in the vLLM environment: `spectrace.instrument()`,
then vLLM's offline `LLM` on the tiny models with an EAGLE-3 draft, and `check_pair` on
the worker's own model objects; prints `RESULT {json}`.

    VLLM_PYTHON tests/programs/vllm_offline_llm.py MODELS_DIR OUTPUT_DIR PROMPTS_JSON
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def audit(worker):  # runs in the worker process: check_pair on vLLM's own model objects
    import spectrace
    r = worker.model_runner
    return [f.code for f in spectrace.check_pair(r.get_model(), r.drafter.model,
                                                 r.speculative_config.method)]


def main() -> None:
    import spectrace
    # before vLLM is imported, as a user's script would
    spectrace.instrument(output_dir=sys.argv[2], metric_interval_s=0.5, agreement_every=1)
    from vllm import LLM, SamplingParams

    models = sys.argv[1]
    llm = LLM(model=f"{models}/target", dtype="float32", enforce_eager=True, max_model_len=256,
              max_num_seqs=4, max_num_batched_tokens=256,
              speculative_config={"method": "eagle3", "model": f"{models}/draft",
                                  "num_speculative_tokens": 3})
    outs = llm.generate([{"prompt_token_ids": p} for p in json.loads(sys.argv[3])],
                        SamplingParams(max_tokens=24, temperature=0, ignore_eos=True))
    codes = llm.collective_rpc(audit)
    time.sleep(2)  # two metric exports after the last step
    print("RESULT", json.dumps({"text": [o.outputs[0].text for o in outs],
                                "check_pair": codes}), flush=True)


if __name__ == "__main__":  # vLLM's spawned processes import this module again
    main()
