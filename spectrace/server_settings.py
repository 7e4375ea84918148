"""The server settings that change acceptance, each declared once: its key, its words, and,
for the few the field reports as a cause of lower acceptance, the clue the verdict names
when acceptance is low. The adapters read the values at start-up from the runtime's own
config objects (`adapters.sglang_settings`: SGLang's ServerArgs in the scheduler;
`adapters.vllm_settings`: vLLM's VllmConfig in the EngineCore and the worker); each
becomes a resource attribute `spectrace.setting.<key>` of the process, and `spectrace
report` shows them in every view's header.

Values are plain: str, int or bool; a setting the runtime does not have is left out.
A clue is named only when acceptance is already low (`report.verdict`): a setting never
makes a verdict by itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from . import names

PREFIX = names.RES_SETTING_PREFIX

# what a KV-cache dtype below the model's own is spelled as, in either runtime
LOW_PRECISION_KV = ("fp8", "fp4", "int8", "int4", "nvfp4", "mxfp")
# speculative methods without a draft model (no draft states to be trained on), as either
# runtime spells them (lower case)
NO_DRAFT_MODEL = ("ngram", "ngram_gpu", "suffix", "lookahead")


@dataclass(frozen=True)
class Setting:
    """One setting: `key` (the resource attribute's suffix and the `--json` key), `label`
    (the report's words), `cause` (the clue's words, from all the settings, when the value
    is a known cause of lower acceptance; None otherwise) and `fix`."""
    key: str
    label: str
    cause: Callable[[Mapping], str | None] | None = None
    fix: str = ""

    @property
    def attribute(self) -> str:
        return PREFIX + self.key


def _has_draft_model(s: Mapping) -> bool:
    return str(s.get("spec_method") or "").lower() not in NO_DRAFT_MODEL


def _low_kv(s: Mapping, key: str, whose: str) -> str | None:
    v = str(s.get(key) or "").lower()
    if not _has_draft_model(s) or not any(v.startswith(p) for p in LOW_PRECISION_KV):
        return None
    return (f"{whose} KV cache is {s[key]}, a known cause of lower acceptance (MTP "
            f"0.725 -> 0.630 with fp8 KV, vllm#55557; a draft's fp8 KV 2.7 -> 1.79, "
            f"tokenspeed#1012): drafts are trained on bf16 states")


def _quantized(s: Mapping) -> str | None:
    v = s.get("quantization")
    if not v or str(v).lower() in ("none", "auto") or not _has_draft_model(s):
        return None
    return (f"the target is quantized ({v}), a known cause of lower acceptance when the "
            f"draft was trained on the unquantized target's hidden states (vllm#9534)")


def _async_ngram(s: Mapping) -> str | None:
    if s.get("async_scheduling") is True and str(s.get("spec_method") or "").lower() in (
            "ngram", "ngram_gpu"):
        return ("n-gram speculation runs with async scheduling, a known cause of lower "
                "acceptance (1.22 % against 70 %, vllm#37150)")
    return None


SETTINGS: tuple[Setting, ...] = (
    Setting("kv_cache_dtype", "KV cache", lambda s: _low_kv(s, "kv_cache_dtype", "the target's"),
            "compare a run with the KV cache at the model's dtype (--kv-cache-dtype auto)"),
    Setting("draft_kv_cache_dtype", "draft KV cache",
            lambda s: None if s.get("draft_kv_cache_dtype") == s.get("kv_cache_dtype")
            else _low_kv(s, "draft_kv_cache_dtype", "the draft's"),
            "compare a run with the draft's KV cache at the model's dtype (SGLang "
            "--speculative-draft-kv-cache-dtype auto; vLLM kv_cache_dtype in "
            "--speculative-config)"),
    Setting("quantization", "quantization", _quantized,
            "train or fine-tune the draft on the quantized target's hidden states, or "
            "compare a run of the unquantized target"),
    # no clue: the field names no cause for a quantized draft (the target's is the one)
    Setting("draft_quantization", "draft quantization"),
    Setting("cuda_graph", "CUDA graphs"),
    Setting("cuda_graph_max_bs", "CUDA graphs up to batch"),
    Setting("async_scheduling", "overlap/async scheduling", _async_ngram,
            "compare a run without async scheduling (vLLM --no-async-scheduling)"),
    Setting("prefix_caching", "prefix caching"),
    Setting("grammar_backend", "grammar backend"),
    Setting("disaggregation", "disaggregation"),
    Setting("attention_dp_size", "attention DP"),
    Setting("tp_size", "TP"),
    Setting("pp_size", "PP"),
    Setting("ep_size", "EP"),
    Setting("spec_method", "speculative method"),
    Setting("spec_num_steps", "draft steps"),
    Setting("spec_topk", "top-k"),
    Setting("spec_num_draft_tokens", "draft tokens"),
    Setting("spec_adaptive", "adaptive K"),
    # what adaptive K follows: SGLang's --speculative-adaptive-config (its file, or SGLang's
    # built-in table), vLLM's num_speculative_tokens_per_batch_size
    Setting("spec_adaptive_config", "adaptive config"),
    # how drafts are verified (vLLM's rejection_sample_method; SGLang's switches): what an
    # acceptance figure means (`rules.verification` names a lossy one)
    Setting("spec_verification", "verification"),
    # the template chat requests are rendered with (spectrace.chat_template.applied): a
    # draft trained with another loses acceptance on chat traffic; `spectrace doctor`
    # prints the same hash for the draft's training template
    Setting("chat_template", "chat template"),
    Setting("chat_template_hash", "chat template sha256"),
)
BY_KEY = {s.key: s for s in SETTINGS}
ATTRIBUTES = {s.attribute: s for s in SETTINGS}


def plain(value):
    """A setting's value as a resource attribute holds it (str, int, bool), or None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)  # enums (vLLM's CUDAGraphMode, ...)
    return str(name if isinstance(name, str) else value)


def resource_attributes(values: Mapping) -> dict:
    """`spectrace.setting.<key>` for each declared setting with a value."""
    return {BY_KEY[k].attribute: plain(v) for k, v in values.items()
            if k in BY_KEY and plain(v) is not None}


def from_resource(attrs: Mapping) -> dict:
    """The settings a process's resource attributes hold, in declaration order."""
    return {s.key: attrs[s.attribute] for s in SETTINGS if s.attribute in attrs
            and isinstance(attrs[s.attribute], (bool, int, float, str))}


def text(values: Mapping) -> str:
    """"KV cache fp8_e4m3, draft KV cache auto, CUDA graphs off, ..." (declared order); a
    list (processes that differ, `combine`) as "a/b"."""
    def one(v):
        return "on" if v is True else "off" if v is False else str(v)

    def word(v):
        return "/".join(one(x) for x in v) if isinstance(v, list) else one(v)
    return ", ".join(f"{s.label} {word(values[s.key])}" for s in SETTINGS if s.key in values)


def combine(per_process) -> dict:
    """The settings of a server's processes together (vLLM's EngineCore and workers, SGLang's
    ranks hold the same), each once: its value, or the list of the distinct values where
    processes differ (several servers writing to one folder)."""
    seen: dict = {}
    for values in per_process:
        for k, v in values.items():
            vals = seen.setdefault(k, [])
            if v not in vals:
                vals.append(v)
    return {s.key: seen[s.key][0] if len(seen[s.key]) == 1 else seen[s.key]
            for s in SETTINGS if s.key in seen}


def read(reads: Mapping, config, hook: str) -> dict:
    """Each setting's value from a runtime's config object: `reads` maps a key to the ways
    releases spell it (functions of `config`), the first that reads wins; a way that
    raises AttributeError, KeyError or TypeError is a release without that field (the
    next is tried), any other error is counted under `hook` and the setting skipped."""
    from .safety import INTERNAL_ERRORS
    out = {}
    if config is None:
        return out
    for key, ways in reads.items():
        for way in ways:
            try:
                value = way(config)
            except (AttributeError, KeyError, TypeError):
                continue
            except Exception as exc:  # noqa: BLE001 - a setting is never worth the server
                INTERNAL_ERRORS.record(hook, exc)
                break
            if value is not None:
                out[key] = plain(value)
            break
    return out


def causes(values: Mapping) -> list[tuple[str, str, str]]:
    """(key, clause, fix) of each setting whose value is a known cause of lower
    acceptance."""
    out = []
    for s in SETTINGS:
        clause = s.cause(values) if s.cause is not None else None
        if clause:
            out.append((s.key, clause, s.fix))
    return out
