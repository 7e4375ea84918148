"""Which process's counts the totals add, so that each request-step is counted once
whatever the layout of ranks.

Processes that run the same requests at the same pipeline stage see the same
request-steps and run the draft on the same passes: SGLang's tensor-parallel ranks of one
attention group (its attention-TP and attention-CP ranks), vLLM's tensor-parallel workers.
One of them, rank 0 of that group, counts them `once`; the others are a `copy` (their own
view, kept per rank, never added). With pipeline parallelism only the last stage
verifies and runs the draft, so only it counts. Different attention-DP groups (SGLang's
DP attention), data-parallel replicas and vLLM's EngineCores (one per DP rank) serve
different requests: each group's rank 0 counts once, and the totals add them.

What a process knows of its place is a `Placement`; unknown fields count as a single
process would (`once`), so a runtime that tells nothing is counted as before.
"""
from __future__ import annotations

from dataclasses import dataclass

from .names import COUNTED_COPY as COPY  # same request-steps as rank 0: per rank only
from .names import COUNTED_ONCE as ONCE  # the process whose figures the totals add


@dataclass(frozen=True)
class Placement:
    """Where a process sits, as far as counting goes (None: not known)."""

    peer_rank: int | None = None  # rank among the processes that run the same requests
    pp_rank: int | None = None    # pipeline stage
    pp_size: int | None = None    # pipeline stages


def scope(place: Placement) -> str:
    """`ONCE` for rank 0 of its peers on the last pipeline stage, else `COPY`."""
    if place.peer_rank is not None and place.peer_rank != 0:
        return COPY
    if (place.pp_rank is not None and place.pp_size is not None
            and place.pp_rank != place.pp_size - 1):
        return COPY
    return ONCE


def counts_once(scope_value) -> bool:
    """Whether figures written with this scope belong in the totals: `ONCE`, or none
    (files and series of a spectrace that did not say: a single process)."""
    return scope_value != COPY
