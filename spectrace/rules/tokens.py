"""Draft/target token agreement, computed on the device where the tokens are.

The runtime verifies draft tokens against the target's predictions on the GPU; comparing
them there and copying back a few counts (asynchronously, into pinned memory, with an
event to poll) adds no device-to-host synchronisation. Pure tensor functions: torch is
imported lazily, no runtime imports.
"""
from __future__ import annotations


def compare_chain_tokens(draft_token, predicted, batch_size: int, num_draft_tokens: int):
    """Per-position agreement of a top-k 1 chain, computed on the device: draft token at
    position k (column k+1 of the verify input) vs the target's prediction at column k.
    Returns (counts on the CPU, completion event or None). Never blocks: on CUDA the copy
    is asynchronous into pinned memory and its event is polled later."""
    n = num_draft_tokens
    d = draft_token.reshape(batch_size, n)[:, 1:]
    t = predicted.reshape(batch_size, n)[:, :-1]
    return compare_positions(d, t)


def compare_positions(draft_tokens, predicted):
    """Per-position agreement of drafts already aligned with the target's predictions for
    the same positions (`[batch, positions]`, or flat request-major with `.view` done by
    the caller). Same return as `compare_chain_tokens`."""
    return to_host((draft_tokens == predicted).sum(0))


def compare_tree_top1_path(draft_token, predicted, next_token, batch_size: int,
                           num_draft_tokens: int, steps: int):
    """Per-position agreement along the top-1 path of a draft tree (top-k > 1), on the
    device: from the root, follow each node's first child (`retrieve_next_token`; SGLang
    orders a node's children by rank, so the first is the best kept one) and compare the
    child's draft token with the target's prediction at its parent. A path that ends early
    counts as disagreement from there on. Same return as `compare_chain_tokens`."""
    import torch
    n = num_draft_tokens
    d = draft_token.reshape(batch_size, n)
    t = predicted.reshape(batch_size, n)
    nxt = next_token.reshape(batch_size, n).long()
    cur = torch.zeros((batch_size, 1), dtype=torch.long, device=d.device)
    alive = torch.ones((batch_size, 1), dtype=torch.bool, device=d.device)
    agree = []
    for _ in range(steps):
        child = nxt.gather(1, cur)
        alive = alive & (child >= 0)
        child = child.clamp(min=0)
        agree.append(alive & (d.gather(1, child) == t.gather(1, cur)))
        cur = child
    return to_host(torch.cat(agree, 1).sum(0))


def to_host(counts):
    """Counts on the CPU without blocking: on CUDA an asynchronous copy into pinned memory
    plus an event to poll; on the CPU the tensor itself."""
    import torch
    if counts.is_cuda:
        host = torch.empty(counts.shape, dtype=counts.dtype, device="cpu", pin_memory=True)
        host.copy_(counts, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event
    return counts, None
