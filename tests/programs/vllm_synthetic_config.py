"""A process for tests/test_e2e_runtime_causes.py, in the vLLM environment: vLLM's own
config classes resolve a `--speculative-config` with `rejection_sample_method:
"synthetic"` (vLLM's CPU sampler refuses to run it: "Synthetic acceptance not supported
with CPU sampling", so no server can), vLLM's real `RejectionSampler` is built from it,
and spectrace's scheduler hook reads the same resolved config; prints `RESULT {json}`.

    VLLM_PYTHON tests/programs/vllm_synthetic_config.py MODELS_DIR OUTPUT_DIR SPECS_JSON

SPECS_JSON: a list of extra `--speculative-config` keys, one result each (one vLLM import).

What is a stand-in: the scheduler object the hook is given (a namespace holding the real
`VllmConfig` and `num_spec_tokens`): vLLM's `Scheduler` needs a KV-cache layout that only
an engine builds.
"""
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    import spectrace
    spectrace.instrument(output_dir=sys.argv[2], metric_interval_s=0.5)
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler

    from spectrace.adapters import vllm_engine
    from spectrace import process

    models = sys.argv[1]
    results = []
    for extra in json.loads(sys.argv[3]):
        spec = {"method": "eagle3", "model": f"{models}/draft", "num_speculative_tokens": 3,
                **extra}
        config = EngineArgs(model=f"{models}/target", dtype="float32", enforce_eager=True,
                            max_model_len=256, speculative_config=spec).create_engine_config()
        sc = config.speculative_config
        sampler = RejectionSampler(Sampler(), sc, device="cpu")
        scheduler = types.SimpleNamespace(num_spec_tokens=sc.num_speculative_tokens,
                                          vllm_config=config)
        rec = process.STATE.recorder
        before = dict(rec.findings.counts) if rec else {}
        vllm_engine._after_scheduler_init(None, scheduler, None)
        after = dict(process.STATE.recorder.findings.counts)
        results.append({"vllm_synthetic_mode": bool(sampler.synthetic_mode),
                        "method": sc.rejection_sample_method,
                        "rates": sc.synthetic_acceptance_rates,
                        "new_findings": {k: v - before.get(k, 0) for k, v in after.items()
                                         if v != before.get(k, 0)}})
    process.STATE.telemetry.shutdown()
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
