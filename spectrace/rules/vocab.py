"""Checks of the EAGLE-3 draft-to-target vocabulary map (`d2t`).

SGLang's `LlamaForCausalLMEagle3.load_weights` turns the checkpoint's `d2t` into
`hot_token_id = d2t + arange(draft_vocab)`, vLLM's into `draft_id_to_target_id` added to
an arange the same way: draft id i proposes target id i + d2t[i].
A wrong map does not crash anything; the draft simply proposes the wrong tokens and
acceptance collapses. This module is pure (plain ints, no torch) so the doctor can run
it on the checkpoint and the instrumentation on what SGLang really loaded
(offsets = hot_token_id - arange).

Heuristic for `vocab.d2t_absolute` (documented in docs/doctor.md): `d2t` "looks absolute"
when it has at least 2 entries, its values are pairwise distinct, and every value is
itself a valid target id (0 <= d2t[i] < target vocab). Real offset maps are built from
sorted hot ids (d2t[i] = hot[i] - i), so they are non-decreasing with long runs of equal
values wherever consecutive target ids are hot; pairwise distinct offsets would need no
two adjacent target ids to be hot, which does not happen for a frequency-chosen draft
vocabulary. `arange(draft_vocab)` (absolute ids written where zeros were meant) and a list
of absolute hot ids (sorted or in frequency order) both match.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from .. import messages, names
from ..findings import ERROR, Alert, Finding, FindingSpec
from ..runtimes import SGLANG, Runtime

_MAP = "the map as the draft loaded it"
MAP_ALERT = Alert(
    "SpectraceVocabularyMapError",
    "Draft vocabulary map (d2t) problem on {{ $labels.instance }}: {{ $labels.code }}",
    "The draft-to-target vocabulary map is missing, absolute or out of range, so draft ids "
    "map to wrong target tokens. Run `spectrace doctor` on the draft checkpoint.")
SPECS = tuple(FindingSpec(code, ERROR, what, floor=_MAP, alert=MAP_ALERT, message=message)
              for code, what, message in (
    (names.VOCAB_D2T_MISSING, "no d2t map where the draft's vocabulary is smaller than the "
     "target's", messages.D2T_MISSING),
    (names.VOCAB_D2T_ABSOLUTE, "d2t holds absolute target ids, not offsets",
     messages.D2T_ABSOLUTE),
    (names.VOCAB_D2T_OUT_OF_RANGE, "d2t maps draft ids beyond the target's vocabulary",
     messages.D2T_OUT_OF_RANGE),
    (names.VOCAB_D2T_DUPLICATES, "d2t maps several draft ids to one target id",
     messages.D2T_DUPLICATES),
))

MAX_EXAMPLES = 5


def looks_absolute(d2t: Sequence[int], target_vocab_size: int) -> bool:
    """True when `d2t` reads as a list of absolute target ids (see module docstring)."""
    if len(d2t) < 2 or min(d2t) < 0 or max(d2t) >= target_vocab_size:
        return False
    return len(set(d2t)) == len(d2t)


def check_vocab_map(d2t_offsets: Sequence[int] | Any | None, draft_vocab_size: int | None,
                    target_vocab_size: int | None, hot_ids: Sequence[int] | None = None,
                    runtime: Runtime = SGLANG) -> list[Finding]:
    """Findings for a draft-to-target map given as offsets (`d2t`), or None when absent.

    `draft_vocab_size` is the draft config's `draft_vocab_size` (None: same as target);
    `target_vocab_size` None skips the range checks. Accepts any sequence of ints, or an
    object with `.tolist()` (a tensor or array). `hot_ids`: the target ids the checkpoint's
    `t2d` marks, when it has one; it settles the absolute-or-offsets question both ways
    (an offset map whose hot ids are exactly these is not called absolute; its range and
    duplicates are still checked). `runtime`: whose loader the words describe.
    """
    if d2t_offsets is None:
        if (draft_vocab_size is not None and target_vocab_size is not None
                and draft_vocab_size < target_vocab_size):
            return [_missing(draft_vocab_size, target_vocab_size, runtime.label)]
        return []
    if hasattr(d2t_offsets, "tolist"):
        d2t_offsets = d2t_offsets.tolist()
    d2t = [int(x) for x in d2t_offsets]
    if not d2t:
        return []
    hot = [i + d for i, d in enumerate(d2t)]
    reading = t2d_reading(d2t, hot_ids)
    if reading == "absolute" and target_vocab_size is not None:
        return [_absolute(d2t, target_vocab_size, runtime.label, confirmed=True)]
    if (reading != "offsets" and target_vocab_size is not None
            and looks_absolute(d2t, target_vocab_size)):
        return [_absolute(d2t, target_vocab_size, runtime.label)]
    findings = []
    if target_vocab_size is not None:
        bad = [i for i, h in enumerate(hot) if h < 0 or h >= target_vocab_size]
        if bad:
            findings.append(_out_of_range(d2t, hot, bad, target_vocab_size, runtime.label))
    counts = Counter(hot)
    dup_ids = sorted(h for h, c in counts.items() if c > 1)
    if dup_ids:
        findings.append(_duplicates(hot, dup_ids, counts))
    return findings


def _missing(draft_vocab: int, target_vocab: int, runtime: str) -> Finding:
    return Finding(names.VOCAB_D2T_MISSING, ERROR, messages.D2T_MISSING.render(
        draft_vocab=draft_vocab, target_vocab=target_vocab, runtime=runtime),
        {"draft_vocab_size": draft_vocab, "target_vocab_size": target_vocab})


def absolute_to_offsets(d2t: Sequence[int], target_vocab_size: int,
                        hot_ids: Sequence[int] | None = None) -> list[int] | None:
    """`d2t` rewritten as offsets (d2t[i] - i) when it is unambiguously a list of absolute
    ids: `t2d` marks exactly these ids, or (without `t2d`) it is not in ascending order
    (trainers build offsets from sorted hot ids, so an offset map never descends) or it is
    `arange` (absolute ids written where zeros were meant). None otherwise."""
    d2t = [int(x) for x in d2t]
    if not looks_absolute(d2t, target_vocab_size):
        return None
    reading = t2d_reading(d2t, hot_ids)
    if reading is None:
        sure = d2t == list(range(len(d2t))) or any(b < a for a, b in zip(d2t, d2t[1:]))
    else:
        sure = reading == "absolute"
    return [d - i for i, d in enumerate(d2t)] if sure else None


def t2d_reading(d2t: Sequence[int], hot_ids: Sequence[int] | None) -> str | None:
    """What the checkpoint's `t2d` says `d2t` holds: "offsets" (it marks exactly the ids
    i + d2t[i]), "absolute" (exactly the values of `d2t`), "neither", or None when there is
    no `t2d` marking as many ids as `d2t` has entries. (Both cannot hold for more than
    one entry: the sums would differ.)"""
    if hot_ids is None or len(hot_ids) != len(d2t):
        return None
    marked = sorted(hot_ids)
    if sorted(i + d for i, d in enumerate(d2t)) == marked:
        return "offsets"
    return "absolute" if sorted(d2t) == marked else "neither"


def _absolute(d2t: list[int], target_vocab: int, runtime: str,
              confirmed: bool = False) -> Finding:
    out = sum(1 for i, d in enumerate(d2t) if not 0 <= i + d < target_vocab)
    is_arange = d2t == list(range(len(d2t)))
    what, proposes = messages.D2T_ABSOLUTE_ARANGE if is_arange else messages.D2T_ABSOLUTE_IDS
    return Finding(names.VOCAB_D2T_ABSOLUTE, ERROR, messages.D2T_ABSOLUTE.render(
        what=what, first=d2t[:3], confirmed=messages.D2T_ABSOLUTE_CONFIRMED if confirmed else "",
        runtime=runtime, proposes=proposes,
        outside=messages.D2T_ABSOLUTE_OUTSIDE.format(count=out) if out else "", length=len(d2t)),
        {"first_values": d2t[:MAX_EXAMPLES], "looks_like_arange": is_arange,
         "hot_ids_out_of_range": out, "target_vocab_size": target_vocab,
         "confirmed_by_t2d": confirmed})


def _out_of_range(d2t: list[int], hot: list[int], bad: list[int], target_vocab: int,
                  runtime: str) -> Finding:
    ex = [{"draft_id": i, "d2t": d2t[i], "target_id": hot[i]} for i in bad[:MAX_EXAMPLES]]
    return Finding(names.VOCAB_D2T_OUT_OF_RANGE, ERROR, messages.D2T_OUT_OF_RANGE.render(
        count=len(bad), target_vocab=target_vocab, draft_id=bad[0], target_id=hot[bad[0]],
        runtime=runtime),
        {"count": len(bad), "examples": ex, "target_vocab_size": target_vocab})


def _duplicates(hot: list[int], dup_ids: list[int], counts: Counter) -> Finding:
    first = dup_ids[0]
    sources = [i for i, h in enumerate(hot) if h == first][:MAX_EXAMPLES]
    return Finding(names.VOCAB_D2T_DUPLICATES, ERROR, messages.D2T_DUPLICATES.render(
        count=len(dup_ids), sources=sources, target_id=first),
        {"count": len(dup_ids),
         "examples": [{"target_id": h, "times": counts[h]} for h in dup_ids[:MAX_EXAMPLES]]})
