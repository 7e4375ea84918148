"""Draft/target token agreement per position: small count tensors computed on the device
(`rules.tokens`) and copied without blocking, read only once their copy has completed.
Unlike the accepted tokens, agreement sees past the first rejection."""
from __future__ import annotations

import threading
from collections import deque

from opentelemetry.metrics import Observation

from .. import names
from ..names import COUNTER, MetricSpec
from .instruments import CollectionReads, observe

SPEC_AGREEMENT_DRAFTS = MetricSpec(
    "spectrace.spec.agreement_drafts", COUNTER, "{draft}",
    "Request-steps whose draft tokens were compared with the target's predictions "
    "(the denominator of token agreement; sampled).", counted_once=True)
SPEC_AGREEMENT_PER_POSITION = MetricSpec(
    "spectrace.spec.token_agreement_per_position", COUNTER, "{token}",
    "Compared request-steps where the draft token at `position` equals the token the "
    "target predicted there.", (names.ATTR_POSITION,), counted_once=True)
METRICS = (SPEC_AGREEMENT_DRAFTS, SPEC_AGREEMENT_PER_POSITION)


class Agreement:
    """Per-position agreement of one process. `add` keeps the copy in flight; `fold` reads
    the completed ones, oldest first, never waiting for the device."""

    def __init__(self) -> None:
        self._pending: deque = deque()
        self._lock = threading.Lock()
        self.drafts = 0
        self.per_position: list[int] = []

    def add(self, agree_counts_cpu, done_event, batch_size: int) -> None:
        self._pending.append((agree_counts_cpu, done_event, batch_size))

    def fold(self) -> None:
        with self._lock:
            while self._pending:
                counts, event, bs = self._pending[0]
                if event is not None and not event.query():
                    return  # copy still in flight: never wait for the device
                self._pending.popleft()
                values = counts.tolist()
                if len(self.per_position) < len(values):
                    self.per_position.extend([0] * (len(values) - len(self.per_position)))
                for p, v in enumerate(values):
                    self.per_position[p] += int(v)
                self.drafts += bs

    def folded(self) -> "Agreement":
        self.fold()
        return self

    def register(self, meter, scope: dict) -> None:
        read = CollectionReads(self.folded).reader
        observe(meter, SPEC_AGREEMENT_DRAFTS, read(lambda a: [Observation(a.drafts)]), scope)
        observe(meter, SPEC_AGREEMENT_PER_POSITION, read(lambda a: [
            Observation(v, {names.ATTR_POSITION: p})
            for p, v in enumerate(a.per_position)]), scope)
