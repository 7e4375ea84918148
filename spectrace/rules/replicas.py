"""One replica of a deployment accepting far less than the rest of it:
`acceptance.replica_low`.

The replicas of one deployment (the same service and draft: `report.summary.group_of`)
serve the same traffic behind a router, whole requests each, so their acceptance should
agree; one that accepts far less is one process gone wrong (a node whose draft weights
were not loaded, a stale copy of the draft, a bad device) while the others hide it in the
fleet's mean. The worst replica with at least FLOOR request-steps is compared with the
others of its deployment pooled (at least FLOOR together): it fires when its accepted
tokens per request-step are at most RATIO of theirs and DROP fewer: far enough that a
router keeping tenants on replicas (each replica's traffic its own) does not reach it,
near enough that a replica whose draft is not used (nothing accepted) or mostly broken
does. Data-parallel ranks with their own requests count as replicas; tensor-parallel
copies do not (their request-steps are their rank 0's). Floors and false alarms: benchmarks/replica_rule.py.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from .. import names
from ..findings import WARNING, Finding, FindingSpec
from ..messages import Message

CODE = "acceptance.replica_low"
FLOOR = 5000  # request-steps of the replica, and of the others together
RATIO = 0.15  # its accepted tokens per request-step at most 0.15x the others' ...
DROP = 0.3    # ... and at least this many fewer

MESSAGE = Message(
    CODE,
    "one replica accepts far less than the rest of its deployment: {process} {gain:.2f} "
    "accepted draft tokens per request-step over {drafts:,.0f} request-steps, against "
    "{others_gain:.2f} for {others} of {deployment}.",
    "look at that process, not the draft: `spectrace report` on its own folder (or "
    "`--selector 'instance=\"...\"'`) for its findings (dropped weights, fc bypass, aux "
    "capture), and compare its draft files and settings with a healthy replica's "
    "(`spectrace report --baseline`, or `--baseline-selector`).")

SPEC = FindingSpec(
    CODE, WARNING,
    "one replica of a deployment (the same service and draft) accepting far less than its "
    "other replicas pooled: one process gone wrong",
    floor=f"{FLOOR} request-steps of the replica and of the others together; its accepted "
          f"tokens per request-step at most {RATIO:g}x theirs and {DROP:g} fewer",
    message=MESSAGE)


WORDS = {names.RES_SERVICE_NAME: "deployment", names.RES_DRAFT_MODEL: "draft"}


class Replica(NamedTuple):
    """A counting process of a view: its name, its deployment, its request-steps and
    accepted draft tokens."""
    process: str
    deployment: tuple
    drafts: float
    accepted_tokens: float


def judge(replicas: Iterable[Replica]) -> list[Finding]:
    """The finding for each deployment whose worst replica (past the floor) falls that
    far below its others pooled."""
    by: dict[tuple, list[Replica]] = {}
    for r in replicas:
        by.setdefault(r.deployment, []).append(r)
    out = []
    for deployment, members in sorted(by.items()):
        ok = [r for r in members if r.drafts >= FLOOR]
        if len(members) < 2 or not ok:
            continue
        worst = min(ok, key=lambda r: r.accepted_tokens / r.drafts)
        drafts = sum(r.drafts for r in members) - worst.drafts
        if drafts < FLOOR:
            continue
        gain = worst.accepted_tokens / worst.drafts
        others = (sum(r.accepted_tokens for r in members) - worst.accepted_tokens) / drafts
        if gain <= RATIO * others and others - gain >= DROP:
            out.append(SPEC.found(
                {"process": worst.process, "deployment": dict(deployment),
                 "drafts": worst.drafts, "gain": round(gain, 4),
                 "others_gain": round(others, 4), "others": len(members) - 1},
                process=worst.process, gain=gain, drafts=worst.drafts, others_gain=others,
                others=("the other replica" if len(members) == 2 else
                        f"the other {len(members) - 1} replicas together"),
                deployment=", ".join(f"{WORDS.get(k, k)} {v}" for k, v in deployment)
                or "the deployment"))
    return out
