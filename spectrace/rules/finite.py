"""Non-finite values (inf, nan) in what the draft computes, checked on the device.

A draft trained in bfloat16 and served in float16 can overflow (float16 ends at 65504);
its hidden states turn to inf/nan, its proposals are garbage and acceptance falls to
about 1.0 with nothing in the logs. Checking every pass would cost a reduction per pass,
so the adapters check a sampled pass (every Nth, `SPECTRACE_FINITE_EVERY`): one fused
`isfinite(x).all()` per tensor into a small device tensor, copied to pinned host memory
without blocking (`tokens.to_host`), read at a later pass only once its event says the
copy is done. On the CPU the result is read directly (there is no device to wait for).

Floor: one check that saw a non-finite value is enough for the error (a healthy draft
never produces inf/nan; there is no noise to average out), and the finding says how many
of how many checks saw it. Pure tensor functions; torch is imported lazily.
"""
from __future__ import annotations

import threading
from collections import deque

from .. import messages, names
from ..findings import ERROR, Alert, Finding, FindingSpec
from .tokens import to_host

SPECS = (FindingSpec(
    names.DRAFT_NON_FINITE, ERROR,
    "inf or nan in the draft's hidden states or logits (a bfloat16 draft served in "
    "float16, say)",
    floor="one sampled on-device check, read back once its copy completed",
    message=messages.NON_FINITE, alert=Alert(
        "SpectraceDraftNonFinite", "EAGLE-3 draft computes inf/nan on {{ $labels.instance }}",
        "Sampled on-device checks found inf or nan in the draft's hidden states or logits "
        "(e.g. a bfloat16 draft served in float16 overflows): its proposals are garbage and "
        "acceptance falls to about 1.0. The finding draft.non_finite names the dtype.")),)

MIN_NON_FINITE_CHECKS = 1  # checks that saw inf/nan before the error is raised


def finite_flags(tensors):
    """One bool per tensor, True where every element is finite, computed on the device
    (no host read); returns (flags on the host or in flight, completion event or None)."""
    import torch
    flags = torch.stack([torch.isfinite(t).all() for t in tensors])
    return to_host(flags)


class FiniteChecks:
    """The checks of one draft model: pending flag copies, and how many were read and how
    many saw a non-finite value (per checked tensor name). `poll` never waits: it reads
    only copies whose event has completed."""

    __slots__ = ("names", "dtype", "pending", "checks", "bad", "bad_where", "reported",
                 "_lock")

    def __init__(self, names: tuple[str, ...], dtype: str) -> None:
        self.names = names
        self.dtype = dtype
        self.pending: deque = deque()
        self.checks = 0
        self.bad = 0
        self.bad_where: set[str] = set()
        self.reported = False
        self._lock = threading.Lock()

    def add(self, flags, event) -> None:
        self.pending.append((flags, event))

    def poll(self) -> bool:
        """Read the completed checks; True when they reach the floor for the first time
        (the caller raises the finding)."""
        with self._lock:
            pending = self.pending
            while pending:
                flags, event = pending[0]
                if event is not None and not event.query():
                    break  # copy still in flight: read it at a later pass
                pending.popleft()
                self.checks += 1
                values = flags.tolist()  # on the host by now (pinned copy done, or CPU)
                if not all(values):
                    self.bad += 1
                    self.bad_where.update(n for n, ok in zip(self.names, values) if not ok)
            if self.reported or self.bad < MIN_NON_FINITE_CHECKS:
                return False
            self.reported = True
            return True

    def finding(self) -> Finding:
        where = " and ".join(n for n in self.names if n in self.bad_where)
        fix = (messages.NON_FINITE_FIX_HALF if self.dtype in ("float16", "torch.float16")
               else messages.NON_FINITE_FIX)
        msg = messages.NON_FINITE
        return Finding(msg.code, ERROR,
                       msg.render(where=where, bad=self.bad, checks=self.checks,
                                  dtype=self.dtype, fix=fix),
                       {"where": sorted(self.bad_where), "dtype": self.dtype,
                        "non_finite_checks": self.bad, "checks": self.checks})


def dtype_name(tensor) -> str:
    """`torch.float16` -> `float16`."""
    return str(tensor.dtype).removeprefix("torch.")
