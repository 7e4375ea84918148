"""A process for tests/test_doctor_strict_fields.py, run with the python of the environment
under test (the .venv: SGLang; the trainers' or the vLLM environment): what its own
transformers and its runtime make of draft configs. Prints `RESULT {json}` last (the
runtimes log to stdout too).

    python tests/programs/strict_config_loaders.py fields
        transformers' version and, for each config class the doctor declares
        (spectrace.doctor.judge.strict_fields.CLASSES), every field annotated with a type
        (not a string) as `[type spelled as the doctor spells it, default]`
    python tests/programs/strict_config_loaders.py load READER DIR...
        READER (transformers | sglang | vllm) builds the config of each DIR with its own
        config reader: transformers' AutoConfig, SGLang's get_config, vLLM's get_config;
        each DIR -> {"ok": bool, "error": exception class name, "message": first line}
"""
import dataclasses
import json
import sys
import types
import typing

CLASSES = {"llama": "LlamaConfig", "qwen3": "Qwen3Config", "deepseek_v2": "DeepseekV2Config",
           "deepseek_v3": "DeepseekV3Config"}


def spell(tp) -> str:
    """A real annotation in the doctor's spelling: `int | list[int] | None`; a TypedDict
    (RopeParameters) is a dict; each alternative once."""
    if tp is None or tp is type(None):
        return "None"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        alts = []
        for a in args:
            if spell(a) not in alts:
                alts.append(spell(a))
        return " | ".join(alts)
    if origin is list:
        return f"list[{spell(args[0])}]" if args else "list"
    if tp is dict or origin is dict or typing.is_typeddict(tp):
        return "dict"
    if isinstance(tp, type):
        return tp.__name__
    raise ValueError(f"no spelling for {tp!r}")


def fields() -> dict:
    import transformers
    out = {"transformers": transformers.__version__, "classes": {}}
    for model_type, name in CLASSES.items():
        cls = getattr(transformers, name)
        out["classes"][model_type] = {
            f.name: [spell(f.type), f.default] for f in dataclasses.fields(cls)
            if not isinstance(f.type, str)}
    return out


def _reader(name: str):
    if name == "transformers":
        from transformers import AutoConfig
        return AutoConfig.from_pretrained
    if name == "sglang":
        from sglang.srt.utils.hf_transformers_utils import get_config as sglang_config
        return lambda p: sglang_config(p, trust_remote_code=False)
    if name == "vllm":
        from vllm.transformers_utils.config import get_config as vllm_config
        return lambda p: vllm_config(p, trust_remote_code=False)
    raise SystemExit(f"unknown reader {name!r}: transformers, sglang or vllm")


def load(reader: str, dirs: list[str]) -> dict:
    read = _reader(reader)
    out = {}
    for d in dirs:
        try:
            read(d)
            out[d] = {"ok": True}
        except Exception as e:  # noqa: BLE001  (what the reader raises is the answer)
            out[d] = {"ok": False, "error": type(e).__name__,
                      "message": str(e).strip().splitlines()[0] if str(e).strip() else ""}
    return out


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "fields":
        result = fields()
    elif mode == "load" and len(sys.argv) > 3:
        result = load(sys.argv[2], sys.argv[3:])
    else:
        raise SystemExit(__doc__)
    print("RESULT " + json.dumps(result))
