"""Print the server settings spectrace reads from the VllmConfig vLLM's own EngineArgs
resolve from a server's command line (no server): `python vllm_settings_config.py MODELS
RUN_JSON` -> `RESULT {...}`, RUN_JSON `{"method": ..., "spec_extra": {...}, "args": [...]}`
(the harness's server arguments, tests/test_server_settings_real.py); `"models"` in
RUN_JSON replaces MODELS."""
import json
import sys

from vllm.engine.arg_utils import EngineArgs
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

from harness.vllm_server import server_args
from spectrace.adapters import vllm_settings

models, run = sys.argv[1], json.loads(sys.argv[2])
models = run.get("models", models)
argv = server_args(models, 30000, method=run.get("method", "eagle3"),
                   spec_extra=run.get("spec_extra"))[2:] + run.get("args", [])  # no "-m"
config = EngineArgs.from_cli_args(make_arg_parser(FlexibleArgumentParser()).parse_args(
    argv)).create_engine_config()
print("RESULT " + json.dumps(vllm_settings.read(config)), flush=True)
