"""Print the settings spectrace reads from the VllmConfig vLLM's own EngineArgs resolve for
a `--speculative-config` with `rejection_sample_method: "fly"` (FLy: vLLM 0.33; the CPU
build installed here is 0.32, so the test runs 0.33's released Python sources, first on
PYTHONPATH, with the installed build's dependencies and VLLM_TARGET_DEVICE=cpu; no server):
`python vllm_fly_config.py MODELS` -> `RESULT {...}`."""
import json
import sys

import vllm
from vllm.engine.arg_utils import EngineArgs

from spectrace.adapters import vllm_settings

models = sys.argv[1]
spec = {"method": "eagle3", "model": f"{models}/draft", "num_speculative_tokens": 3,
        "rejection_sample_method": "fly"}
config = EngineArgs(model=f"{models}/target", dtype="float32", enforce_eager=True,
                    max_model_len=256, speculative_config=spec).create_engine_config()
print("RESULT " + json.dumps({"vllm_file": vllm.__file__,
                              "fly_window_size": config.speculative_config.fly_window_size,
                              "settings": vllm_settings.read(config)}), flush=True)
