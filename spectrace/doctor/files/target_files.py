"""The checks of a draft and its target beyond the weight keys: the dtype the runtime runs
the draft in (and, for float16, the weights it cannot hold), the target's quantization,
the two tokenizers and the chat templates. This module reads the files (target weight
headers, hf_quant_config.json, tokenizer files; the draft's weights only for the float16
scan; the templates through `trained_template`); the judging is in `judge` (`dtypes`,
`quantization`, `tokenizers`, `chat_templates`: pure functions).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judge.chat_templates import check_chat_template
from ..judge.checkpoint import Judgement
from ..judge.dtypes import FLOAT16, WIDE_RANGE, check_dtype, config_dtype, runtime_dtype, \
    weights_dtype
from ..judge.quantization import check_quantized_target, target_quantization
from ..judge.tokenizers import TokenizerFacts, check_tokenizers, special_ids, \
    special_tokens
from ...findings import Finding
from ...runtimes import SGLANG, Runtime
from ..errors import UnusableInput
from .checkpoint_files import read_json
from .safetensors_header import parse_header
from .trained_template import read as read_template, trained_template
from .weight_scan import float16_overflows

MAX_TOKENIZER_BYTES = 200 << 20  # a tokenizer.json is 2-30 MB; anything larger is not one


@dataclass
class Pairing:
    findings: list[Finding]
    facts: dict[str, Any] = field(default_factory=dict)  # for --json


def check_pairing(ck, target_file: Path, runtime: str, version: str, j: Judgement,
                  dtype: str) -> Pairing:
    """`ck` is a `check.Checkpoint`; `dtype` the runtime's `--dtype` (parsed)."""
    label = f"{Runtime(runtime).label} {version}"
    raw_target = _json(target_file, "target config")
    tdir = target_file.parent
    read = j.view if j.translated and j.view is not None else ck.view.config
    run = runtime_dtype(runtime, dtype, read if runtime == SGLANG else ck.view.config,
                        raw_target, _target_weights_dtype(tdir))
    said, saved = config_dtype(ck.view.config), weights_dtype(ck.view.dtypes)
    overflows = float16_overflows(ck) if run.dtype == FLOAT16 and saved in WIDE_RANGE else None
    findings = check_dtype(runtime, version, said, saved, run, overflows)
    hf_quant = tdir / "hf_quant_config.json"
    quant = target_quantization(raw_target, _json(hf_quant, "hf_quant_config.json")
                                if hf_quant.is_file() else None, target_file.name)
    findings += check_quantized_target(quant, label)
    findings += check_tokenizers(tokenizer_facts(ck.path, ck.view.config),
                                 tokenizer_facts(tdir, raw_target))
    template = check_chat_template(trained_template(ck.path, ck.view.config, j.format.name),
                                   read_template(tdir))
    findings += template.findings
    facts = {"dtype": {"config": said, "weights": saved, "runtime": run.dtype, "how": run.how,
                       "weights_scanned": overflows is not None},
             "target_quantization": None if quant is None else
             {"method": quant.method, "scheme": quant.scheme, "where": quant.where},
             "chat_template": {**template.facts, "note": template.note}}
    return Pairing(findings, facts)


def tokenizer_facts(directory: Path, cfg: dict) -> TokenizerFacts:
    facts = TokenizerFacts(ids=special_ids(cfg))
    tc = directory / "tokenizer_config.json"
    if tc.is_file():
        facts.tokens = special_tokens(_json(tc, "tokenizer config"))
    tj = directory / "tokenizer.json"
    if tj.is_file():
        data = _bytes(tj)
        facts.file_hash = hashlib.sha256(data).hexdigest()
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as e:
            raise UnusableInput(f"{tj} is not valid JSON ({str(e).splitlines()[0]})") from None
        if isinstance(obj, dict):
            facts.sections = {k: hashlib.sha256(json.dumps(v, sort_keys=True).encode())
                              .hexdigest() for k, v in obj.items()}
            facts.vocab = _vocab(obj)
    sp = directory / "tokenizer.model"
    if sp.is_file():
        facts.sp_hash = hashlib.sha256(_bytes(sp)).hexdigest()
    return facts


def _vocab(obj: dict) -> dict[str, int] | None:
    """token -> id of a tokenizers JSON: `model.vocab` (a dict for BPE/WordPiece, a list
    of [piece, score] for Unigram) plus `added_tokens`."""
    vocab = (obj.get("model") or {}).get("vocab") if isinstance(obj.get("model"), dict) else None
    if isinstance(vocab, dict):
        out = {str(k): v for k, v in vocab.items() if type(v) is int}
    elif isinstance(vocab, list):
        out = {str(p[0]): i for i, p in enumerate(vocab) if isinstance(p, list) and p}
    else:
        return None
    for t in obj.get("added_tokens") or []:
        if isinstance(t, dict) and isinstance(t.get("content"), str) and type(t.get("id")) is int:
            out[t["content"]] = t["id"]
    return out


def _target_weights_dtype(tdir: Path) -> str | None:
    """What vLLM falls back to when the target config names no dtype: its weights'."""
    files = sorted(tdir.glob("*.safetensors"))
    return weights_dtype({k: i.dtype for k, i in parse_header(files[0]).tensors.items()}) \
        if files else None


def _bytes(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_TOKENIZER_BYTES:
            raise UnusableInput(f"{path} is {path.stat().st_size} bytes, too large for a "
                                f"tokenizer file (limit {MAX_TOKENIZER_BYTES})")
        return path.read_bytes()
    except OSError as e:
        raise UnusableInput(f"cannot read {path}: {e.strerror or e}") from None


def _json(path: Path, what: str) -> dict:
    return read_json(path, what)
