"""The field types transformers 5 declares on the config classes the runtimes build a draft
config with, as data, and what a draft config breaks against them.

From transformers 5.4 a model's config class is a strict dataclass (`@strict`, from
huggingface_hub.dataclasses): every field its class declares with a type is checked when
the config is built, and a value of another type raises
`StrictDataclassFieldValidationError` (`use_cache: null` where `bool` is declared; `1` where
`float` is: an int is not a float; `2048.0` where `int` is). SGLang's `get_config` and
vLLM's `get_config` build a draft's config with transformers' `AutoConfig` (the class of its
`model_type`), so such a draft fails before any weight is read. The fields of the base
`PreTrainedConfig` are annotated as strings and are not checked; nor is a speculators
config on vLLM, whose `SpeculatorsConfig` sets `transformer_layer_config`'s fields as plain
attributes (vllm/transformers_utils/configs/speculators/base.py).

`CLASSES` is checked against the real classes (tests/test_doctor_strict_fields.py: the
.venv's transformers and, where present, the trainers' and vLLM's), `REQUIRES` against the
released runtimes' requirements (SGLang's wheel METADATA, vLLM's requirements/common.txt).
The doctor imports no transformers: it judges with these tables.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any, Mapping

from ... import messages, signals
from ...findings import ERROR, WARNING, Finding, FindingSpec
from ...runtimes import SGLANG, VLLM, Runtime, parse_version

# The finding raised here, declared once (`doctor.judge.codes` gathers it; docs/doctor.md's
# table of codes is written from it).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.CONFIG_FIELD_TYPE, ERROR,
                "a config field's value is not of the type the runtime's transformers declares "
                "on its (strict) config class, so its config reader raises before any weight "
                "is read (a warning where the runtime also allows a transformers without "
                "strict configs); names the field, its value and the type, and what `--fix` "
                "writes"),
)

STRICT_FROM = (5, 4, 0)  # 5.3.0's LlamaConfig has a plain __init__, 5.4.0's is @strict

# the transformers each release requires (pip resolves a range to its newest)
REQUIRES = {
    SGLANG: {"0.5.5": "==4.57.1", "0.5.8": "==4.57.1", "0.5.12": "==5.6.0",
             "0.5.16": "==5.12.1", "0.5.23": "==5.19.0"},
    VLLM: {"0.11.0": ">=4.55.2", "0.13.0": ">=4.56.0,<5", "0.18.0": ">=4.56.0,<5",
           "0.20.0": ">=4.56.0,!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0",
           "0.22.0": ">=4.56.0,!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0",
           "0.26.0": ">=5.5.3", "0.27.0": ">=5.5.3", "0.28.0": ">=5.5.3",
           "0.29.0": ">=5.10.4", "0.30.0": ">=5.10.4", "0.31.0": ">=5.10.4,<5.18.0",
           "0.32.0": ">=5.16.1,<5.20.0", "0.33.0": ">=5.16.1,<5.21.0"},
}


def _table(text: str) -> dict[str, tuple[str, Any]]:
    """`name: type = default` lines, as transformers writes its fields."""
    out = {}
    for line in filter(str.strip, text.splitlines()):
        name, rest = line.split(":", 1)
        spelled, default = rest.split(" = ", 1)
        out[name.strip()] = (spelled.strip(), ast.literal_eval(default.strip()))
    return out


_LLAMA = """
vocab_size: int = 32000
hidden_size: int = 4096
intermediate_size: int = 11008
num_hidden_layers: int = 32
num_attention_heads: int = 32
num_key_value_heads: int | None = None
hidden_act: str = 'silu'
max_position_embeddings: int = 2048
initializer_range: float = 0.02
rms_norm_eps: float = 1e-06
use_cache: bool = True
pad_token_id: int | None = None
bos_token_id: int | None = 1
eos_token_id: int | list[int] | None = 2
pretraining_tp: int | None = 1
tie_word_embeddings: bool = False
rope_parameters: dict | None = None
attention_bias: bool = False
attention_dropout: int | float | None = 0.0
mlp_bias: bool = False
head_dim: int | None = None
"""
_QWEN3 = """
vocab_size: int = 151936
hidden_size: int = 4096
intermediate_size: int = 22016
num_hidden_layers: int = 32
num_attention_heads: int = 32
num_key_value_heads: int | None = 32
head_dim: int = 128
hidden_act: str = 'silu'
max_position_embeddings: int = 32768
initializer_range: float = 0.02
rms_norm_eps: float = 1e-06
use_cache: bool = True
tie_word_embeddings: bool = False
rope_parameters: dict | None = None
attention_bias: bool = False
use_sliding_window: bool = False
sliding_window: int | None = 4096
max_window_layers: int = 28
layer_types: list[str] | None = None
attention_dropout: float | int = 0.0
pad_token_id: int | None = None
bos_token_id: int | None = None
eos_token_id: int | list[int] | None = None
"""
_DEEPSEEK_V2 = _LLAMA.replace("vocab_size: int = 32000", "vocab_size: int = 102400").replace(
    "attention_dropout: int | float | None", "attention_dropout: float | None") + """
first_k_dense_replace: int = 0
kv_lora_rank: int = 512
q_lora_rank: int | None = 1536
n_group: int | None = None
n_routed_experts: int = 64
output_router_logits: bool = False
n_shared_experts: int = 2
qk_nope_head_dim: int = 128
qk_rope_head_dim: int = 64
routed_scaling_factor: float = 1.0
topk_group: int | None = None
topk_method: str | None = 'greedy'
norm_topk_prob: bool | None = False
v_head_dim: int = 128
num_experts_per_tok: int | None = None
moe_intermediate_size: int = 1407
"""
_DEEPSEEK_V3 = """
vocab_size: int = 129280
hidden_size: int = 7168
intermediate_size: int = 18432
moe_intermediate_size: int = 2048
num_hidden_layers: int = 61
num_attention_heads: int = 128
num_key_value_heads: int | None = 128
n_shared_experts: int = 1
n_routed_experts: int = 256
output_router_logits: bool = False
routed_scaling_factor: float = 2.5
kv_lora_rank: int = 512
q_lora_rank: int | None = 1536
qk_rope_head_dim: int = 64
v_head_dim: int | None = 128
qk_nope_head_dim: int = 128
n_group: int | None = 8
topk_group: int | None = 4
num_experts_per_tok: int | None = 8
first_k_dense_replace: int | None = 3
norm_topk_prob: bool | None = True
hidden_act: str = 'silu'
max_position_embeddings: int = 4096
initializer_range: float = 0.02
rms_norm_eps: float = 1e-06
use_cache: bool = True
pad_token_id: int | None = None
bos_token_id: int | None = 0
eos_token_id: int | list[int] | None = 1
pretraining_tp: int | None = 1
tie_word_embeddings: bool = False
rope_parameters: dict | None = None
rope_interleave: bool | None = True
attention_bias: bool = False
attention_dropout: float | int | None = 0.0
num_mtp_layers: int = 1
"""

# model_type -> (class name, field -> (declared type, default)), as transformers 5.19-5.24
CLASSES: dict[str, tuple[str, dict[str, tuple[str, Any]]]] = {
    "llama": ("LlamaConfig", _table(_LLAMA)),
    "qwen3": ("Qwen3Config", _table(_QWEN3)),
    "deepseek_v2": ("DeepseekV2Config", _table(_DEEPSEEK_V2)),
    "deepseek_v3": ("DeepseekV3Config", _table(_DEEPSEEK_V3)),
}


def _alternatives(spelled: str) -> list[str]:
    """`int | list[int] | None` -> ["int", "list[int]", "None"] (brackets kept whole)."""
    out, depth, cur = [], 0, ""
    for ch in spelled:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]


def accepts(spelled: str, value: Any) -> bool:
    """Whether huggingface_hub's strict validator accepts `value` (read from JSON) for a
    field declared `spelled` (an int is not a float, a bool is not an int)."""
    for alt in _alternatives(spelled):
        if alt.startswith("list[") and isinstance(value, list):
            if all(accepts(alt[5:-1], v) for v in value):
                return True
        elif (alt == "None" and value is None or alt == "bool" and isinstance(value, bool)
              or alt == "int" and isinstance(value, int) and not isinstance(value, bool)
              or alt == "float" and isinstance(value, float)
              or alt == "str" and isinstance(value, str)
              or alt == "dict" and isinstance(value, dict)
              or alt == "list" and isinstance(value, list)):
            return True
    return False


@dataclass(frozen=True)
class Strictness:
    """How the runtime release's transformers treats a mistyped field."""
    strict: bool | None  # True: raises; None: only with a 5.4+ transformers; False: never
    requires: str        # its requirement, as its release states it
    release: str         # the release whose requirement this is


def strictness(runtime: str, version: str) -> Strictness | None:
    """The requirement of `version`, else of the newest listed release before it (the oldest
    listed for an older one); None for a runtime without a table."""
    rows = REQUIRES.get(runtime)
    if not rows:
        return None
    v = parse_version(version)
    ordered = sorted(rows, key=parse_version)
    release = next((r for r in reversed(ordered) if parse_version(r) <= v), ordered[0])
    req = rows[release]
    return Strictness(_strict(req), req, release)


def _strict(req: str) -> bool | None:
    parts = [p.strip() for p in req.split(",")]
    if parts[0].startswith("=="):
        return parse_version(parts[0][2:]) >= STRICT_FROM
    floor = next(parse_version(p[2:]) for p in parts if p.startswith(">="))
    ceiling = next((parse_version(p[1:]) for p in parts if p.startswith("<")
                    and not p.startswith("<=")), None)
    if floor >= STRICT_FROM:
        return True
    return False if ceiling is not None and ceiling <= STRICT_FROM else None


@dataclass(frozen=True)
class Mistyped:
    """A field the strict class refuses, and the copy's repair (None: no safe one)."""
    field: str
    value: Any
    expected: str
    default: Any
    repair: tuple[str, Any] | None  # ("drop", None) or ("set", new value)


def mistyped(cfg: Mapping[str, Any]) -> tuple[str, list[Mistyped]] | None:
    """(class name, the fields of `cfg` its declared types refuse) for the class of its
    `model_type`; None when that is not a class in `CLASSES`."""
    found = CLASSES.get(str(cfg.get("model_type")))
    if found is None:
        return None
    name, fields = found
    return name, [Mistyped(k, cfg[k], t, d, _repair(t, cfg[k]))
                  for k, (t, d) in fields.items() if k in cfg and not accepts(t, cfg[k])]


def _repair(spelled: str, value: Any) -> tuple[str, Any] | None:
    """Null where null is not allowed: drop it, so the class default applies, except for an
    int (a size: its default would build a network unlike the weights). A number or a
    boolean spelled another way: the value it spells."""
    alts = _alternatives(spelled)
    if value is None:
        return None if "int" in alts else ("drop", None)
    if isinstance(value, str):
        low = value.strip().lower()
        if "bool" in alts and low in ("true", "false"):
            return "set", low == "true"
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _repair(spelled, value) or (("set", value) if accepts(spelled, value)
                                               else None)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if "bool" in alts and value in (0, 1):
        return "set", bool(value)
    if "float" in alts:
        return "set", float(value)
    if "int" in alts and float(value).is_integer():
        return "set", int(value)
    return None


def check_field_types(cfg: Mapping[str, Any], runtime: str, version: str) -> list[Finding]:
    """config.field_type for each field of `cfg` (the config.json the runtime's get_config
    reads) that its transformers' strict config class refuses."""
    how = strictness(runtime, version)
    found = mistyped(cfg)
    if how is None or how.strict is False or found is None:
        return []
    cls, bad = found
    label = f"{Runtime(runtime).label} {version}"
    req = how.requires
    tf = (messages.FIELD_TYPE_PINNED.format(req=req[2:], runtime=label) if req.startswith("==")
          else messages.FIELD_TYPE_RANGE.format(
              req=req, runtime=label, which=messages.FIELD_TYPE_ALL_STRICT if how.strict
              else messages.FIELD_TYPE_SOME_STRICT))
    out = []
    for m in bad:
        if m.repair is None:
            fix = messages.FIELD_TYPE_BY_HAND.format(field=m.field, expected=m.expected)
        elif m.repair[0] == "drop":
            fix = messages.FIELD_TYPE_DROP.format(field=m.field, default=json.dumps(m.default))
        else:
            fix = messages.FIELD_TYPE_SET.format(field=m.field, new=json.dumps(m.repair[1]))
        out.append(Finding(signals.CONFIG_FIELD_TYPE, ERROR if how.strict else WARNING,
                           messages.FIELD_TYPE.render(
                               field=m.field, value=json.dumps(m.value), cls=cls,
                               expected=m.expected, transformers=tf, runtime=label,
                               model_type=cfg.get("model_type"),
                               outcome=messages.FIELD_TYPE_STRICT if how.strict else
                               messages.FIELD_TYPE_MAYBE, fix=fix),
                           {"field": m.field, "value": m.value, "expected": m.expected,
                            "config_class": cls, "transformers": req,
                            "repair": _repair_dict(m), "runtime": runtime,
                            "version": version}))
    return out


def _repair_dict(m: Mistyped) -> dict | None:
    if m.repair is None:
        return None
    return {"drop": m.field} if m.repair[0] == "drop" else {"set": {m.field: m.repair[1]}}
