"""`check_vocab_map` as a pure function: the doctor passes the checkpoint's `d2t`, the
run-time instrumentation passes SGLang's `hot_token_id - arange`."""
from __future__ import annotations

import random
import time
from array import array

from spectrace.rules.vocab import check_vocab_map, looks_absolute


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def offsets_from_hot(hot: list[int]) -> list[int]:
    return [h - i for i, h in enumerate(hot)]


def test_identity_and_missing():
    assert check_vocab_map([0] * 256, 256, 512) == []
    assert codes(check_vocab_map(None, 256, 512)) == ["vocab.d2t_missing"]
    assert check_vocab_map(None, 512, 512) == []
    assert check_vocab_map(None, None, 512) == []


def test_realistic_frequency_map_is_clean_and_fast():
    rng = random.Random(0)
    target, draft = 128_256, 32_000
    hot = sorted(rng.sample(range(target), draft))  # sorted distinct hot ids, as SpecForge
    d2t = offsets_from_hot(hot)
    t0 = time.perf_counter()
    assert check_vocab_map(d2t, draft, target) == []
    assert time.perf_counter() - t0 < 0.5


def test_absolute_heuristic():
    assert codes(check_vocab_map(list(range(256)), 256, 512)) == ["vocab.d2t_absolute"]
    hot = random.Random(1).sample(range(512), 256)  # absolute ids, frequency order
    assert codes(check_vocab_map(hot, 256, 512)) == ["vocab.d2t_absolute"]
    assert not looks_absolute([0, 0, 1, 1, 2], 512)   # offsets with runs: real map
    assert not looks_absolute([0, 600], 512)           # not valid target ids
    assert not looks_absolute([7], 512)                # too short to tell


def test_out_of_range_and_duplicates_together():
    d2t = [0] * 8
    d2t[7] = 600   # 607 >= 512
    d2t[1] = -1    # draft 1 -> target 0, like draft 0
    f = check_vocab_map(d2t, 8, 512)
    assert codes(f) == ["vocab.d2t_out_of_range", "vocab.d2t_duplicates"]
    assert f[0].details["examples"] == [{"draft_id": 7, "d2t": 600, "target_id": 607}]


def test_accepts_tolist_objects():
    assert codes(check_vocab_map(array("q", range(256)), 256, 512)) == ["vocab.d2t_absolute"]


def test_unknown_target_vocab_only_checks_duplicates():
    assert codes(check_vocab_map([0, -1, 10**9], 3, None)) == ["vocab.d2t_duplicates"]


def test_t2d_confirmed_offsets_still_checked_for_range_and_duplicates():
    """t2d confirming the offsets only settles the absolute-or-offsets question; hot ids
    outside the target vocabulary are still out of range."""
    d2t = [3, 4, 7, 7]  # hot ids 3, 5, 9, 10: the last two >= 8
    assert codes(check_vocab_map(d2t, 4, 8)) == ["vocab.d2t_out_of_range"]
    assert codes(check_vocab_map(d2t, 4, 8, hot_ids=[3, 5, 9, 10])) == ["vocab.d2t_out_of_range"]
    assert codes(check_vocab_map([0, 0, 5], 3, 8, hot_ids=[0, 1, 7])) == []  # leading zeros
