"""The draft's tokenizer against the target's, where both directories carry one.

Neither runtime loads the draft's tokenizer: SGLang tokenizes with the server's (the
target's) tokenizer only, vLLM gives the draft the target's tokenizer unless the
vocabularies are heterogeneous (`SpeculativeConfig`: `tokenizer=self.target_model_config.
tokenizer`). So a draft trained with another tokenizer is fed target token ids that mean
other strings than it learnt, and proposes ids that mean other strings to the target.
The draft's files are the evidence of what it was trained with.

Pure functions over `TokenizerFacts`, which `doctor.check` reads from each directory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ... import messages, signals
from ...findings import ERROR, INFO, WARNING, Finding, FindingSpec


# The findings the doctor raises here, declared once (`doctor.judge.codes` gathers them;
# docs/doctor.md's table of codes is written from them).
SPECS: tuple[FindingSpec, ...] = (
    FindingSpec(signals.VOCAB_TOKENIZER_MISMATCH, ERROR,
                "the draft's tokenizer files differ from the target's (an error where the "
                "vocabularies differ)"),
    FindingSpec(signals.VOCAB_SPECIAL_TOKENS_MISMATCH, WARNING,
                "the draft's special tokens differ from the target's (information where only "
                "config.json's bos/eos/pad ids do)"),
)

SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")
SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")


@dataclass
class TokenizerFacts:
    """What one model directory says about its tokenizer (None: it does not say)."""

    ids: dict[str, Any] = field(default_factory=dict)     # config.json bos/eos/pad ids
    tokens: dict[str, str] = field(default_factory=dict)  # tokenizer_config.json specials
    file_hash: str | None = None       # sha256 of tokenizer.json
    vocab: dict[str, int] | None = None  # tokenizer.json model.vocab + added_tokens
    sections: dict[str, str] = field(default_factory=dict)  # top-level key -> sha256
    sp_hash: str | None = None         # sha256 of tokenizer.model (SentencePiece)


def special_ids(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """bos/eos/pad ids a config states (a speculators config in transformer_layer_config,
    a multimodal wrapper in text_config); null ones are left out."""
    out: dict[str, Any] = {}
    for c in (cfg.get("text_config"), cfg.get("transformer_layer_config"), cfg):
        if isinstance(c, Mapping):
            out.update({k: c[k] for k in SPECIAL_IDS if c.get(k) is not None})
    return out


def special_tokens(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k in SPECIAL_TOKENS:
        v = tokenizer_config.get(k)
        if isinstance(v, Mapping):
            v = v.get("content")
        if isinstance(v, str):
            out[k] = v
    return out


def check_tokenizers(draft: TokenizerFacts, target: TokenizerFacts) -> list[Finding]:
    return _files(draft, target) + _specials(draft, target)


def _files(d: TokenizerFacts, t: TokenizerFacts) -> list[Finding]:
    if d.file_hash and t.file_hash and d.file_hash != t.file_hash:
        if d.vocab is not None and t.vocab is not None and d.vocab != t.vocab:
            moved = sum(1 for tok, i in d.vocab.items() if t.vocab.get(tok) != i)
            only_target = sum(1 for tok in t.vocab if tok not in d.vocab)
            return [Finding(signals.VOCAB_TOKENIZER_MISMATCH, ERROR,
                            messages.TOKENIZER_VOCAB_DIFFERS.render(
                                draft_size=len(d.vocab), target_size=len(t.vocab), moved=moved,
                                only_target=only_target),
                            {"file": "tokenizer.json", "draft_tokens": len(d.vocab),
                             "target_tokens": len(t.vocab), "draft_tokens_with_other_id": moved,
                             "target_tokens_not_in_draft": only_target})]
        differ = sorted(k for k in set(d.sections) | set(t.sections)
                        if d.sections.get(k) != t.sections.get(k))
        return [Finding(signals.VOCAB_TOKENIZER_MISMATCH, WARNING,
                        messages.TOKENIZER_FILE_DIFFERS.render(
                            file="tokenizer.json", sections=", ".join(differ) or "formatting"),
                        {"file": "tokenizer.json", "sections": differ})]
    if d.sp_hash and t.sp_hash and d.sp_hash != t.sp_hash:
        return [Finding(signals.VOCAB_TOKENIZER_MISMATCH, WARNING,
                        messages.TOKENIZER_FILE_DIFFERS.render(
                            file="tokenizer.model", sections="the SentencePiece model"),
                        {"file": "tokenizer.model", "sections": []})]
    return []


def _specials(d: TokenizerFacts, t: TokenizerFacts) -> list[Finding]:
    differ = [(f"config.json {k}", d.ids[k], t.ids[k]) for k in SPECIAL_IDS
              if k in d.ids and k in t.ids and not _same_ids(d.ids[k], t.ids[k])]
    differ += [(f"tokenizer_config.json {k}", d.tokens[k], t.tokens[k]) for k in SPECIAL_TOKENS
               if k in d.tokens and k in t.tokens and d.tokens[k] != t.tokens[k]]
    if not differ:
        return []
    shown = "; ".join(f"{what}: draft {dv!r}, target {tv!r}" for what, dv, tv in differ)
    # config.json ids alone are no evidence: the runtimes never read the draft's, and Model
    # Optimizer's export writes its template's (llama_eagle_template_config: bos 1, eos 2)
    tokenizer_says = any(w.startswith("tokenizer_config.json") for w, _, _ in differ)
    message = messages.SPECIAL_TOKENS_DIFFER if tokenizer_says else messages.SPECIAL_IDS_DIFFER
    return [Finding(signals.VOCAB_SPECIAL_TOKENS_MISMATCH, WARNING if tokenizer_says else INFO,
                    message.render(differences=shown),
                    {"differences": [{"field": w, "draft": dv, "target": tv}
                                     for w, dv, tv in differ]})]


def _same_ids(a: Any, b: Any) -> bool:
    """An id and a list that holds it say the same (eos lists: any of them ends)."""
    sa = {x for x in (a if isinstance(a, list) else [a]) if isinstance(x, (int, str))}
    sb = {x for x in (b if isinstance(b, list) else [b]) if isinstance(x, (int, str))}
    return sa <= sb or sb <= sa
