"""The pure-torch stand-in for `sgl_kernel.speculative.reconstruct_indices_from_tree_mask`
(harness/sgl_kernel_standin/sgl_kernel/speculative.py), which SGLang's NGRAM worker needs
and the CPU build of sgl_kernel lacks. It is a stand-in, not SGLang's code: checked here,
node by node, against the contract SGLang's own fallback kernel documents
(`sglang/kernels/ops/speculative/reconstruct_tree.py`), on random trees."""
from __future__ import annotations

import importlib.util
import os

import pytest

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(os.path.dirname(HERE), "harness", "sgl_kernel_standin", "sgl_kernel",
                       "speculative.py")


def standin():
    spec = importlib.util.spec_from_file_location("standin_speculative", STANDIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.reconstruct_indices_from_tree_mask


def random_tree_mask(torch, gen, bs: int, n: int):
    """Each node i > 0 hangs under a random earlier node; mask[i, j]: j is i or an ancestor."""
    mask = torch.zeros(bs, n, n, dtype=torch.bool)
    for b in range(bs):
        parent = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
        for i in range(n):
            j = i
            while j >= 0:
                mask[b, i, j] = True
                j = parent[j]
    return mask


def by_the_contract(mask, seq_lens, n):
    """The documented semantics, spelled out with loops."""
    bs = mask.shape[0]
    out = {k: [] for k in ("positions", "index", "next_token", "next_sibling")}
    for b in range(bs):
        anc = [[bool(mask[b, i, j]) and j < i for j in range(n)] for i in range(n)]
        parent = [max((j for j in range(i) if anc[i][j]), default=-1) for i in range(n)]
        for t in range(n):
            out["positions"].append(sum(anc[t]) + int(seq_lens[b]))
            out["index"].append(b * n + t)
            out["next_token"].append(min((k for k in range(t + 1, n) if anc[k][t]), default=-1))
            sib = min((k for k in range(t + 1, n) if parent[k] == parent[t]), default=-1)
            out["next_sibling"].append(sib if parent[t] >= 0 else -1)
    return out


@pytest.mark.parametrize("bs,n", [(1, 4), (3, 8), (2, 12)])
def test_standin_meets_the_documented_contract(bs, n):
    import torch
    gen = torch.Generator().manual_seed(bs * 100 + n)
    mask = random_tree_mask(torch, gen, bs, n)
    seq_lens = torch.randint(1, 50, (bs,), generator=gen)
    positions = torch.full((bs * n,), -7, dtype=torch.int64)
    index, next_token, next_sibling = (torch.full((bs, n), -7, dtype=torch.int64)
                                       for _ in range(3))
    standin()(mask.reshape(-1), seq_lens, positions, index, next_token, next_sibling, bs, n)
    want = by_the_contract(mask, seq_lens, n)
    assert positions.tolist() == want["positions"]
    assert index.reshape(-1).tolist() == want["index"]
    assert next_token.reshape(-1).tolist() == want["next_token"]
    assert next_sibling.reshape(-1).tolist() == want["next_sibling"]


def test_the_harness_puts_it_where_sglang_imports_it():
    """SGLang imports it as `sgl_kernel.speculative` on the CPU
    (`kernels/ops/speculative/reconstruct_tree.py`): the module sits in the stand-in
    package the CPU server's PYTHONPATH starts with."""
    from harness.server import STANDIN as STANDIN_DIR
    assert os.path.samefile(os.path.join(STANDIN_DIR, "sgl_kernel", "speculative.py"), STANDIN)
