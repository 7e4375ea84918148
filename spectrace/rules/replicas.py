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
from ..findings import WARNING, Alert, Finding, FindingSpec
from ..messages import Message

CODE = "acceptance.replica_low"
FLOOR = 5000  # request-steps of the replica, and of the others together
RATIO = 0.15  # its accepted tokens per request-step at most 0.15x the others' ...
DROP = 0.3    # ... and at least this many fewer

MESSAGE = Message(
    CODE,
    "one replica accepts far less than the rest of its deployment: {process} {gain} "
    "accepted draft tokens per request-step over {drafts} request-steps, against "
    "{others_gain} for {others} of {deployment}.",
    "look at that process, not the draft: `spectrace report` on its own folder (or "
    "`--selector 'instance=\"...\"'`) for its findings (dropped weights, fc bypass, aux "
    "capture), and compare its draft files and settings with a healthy replica's "
    "(`spectrace report --baseline`, or `--baseline-selector`).")

WINDOW = "1h"  # the alert's: each side's request-steps over the last hour


def _own(spec, flt: str) -> str:
    """A counter's gain over WINDOW per counting process, labelled with its deployment and
    draft from `target_info`."""
    from ..grafana import promql as Q
    return Q.with_resource(Q.srate(spec, WINDOW, Q.SCRAPE_LABELS, flt, fn="increase"),
                           (Q.DEPLOYMENT, Q.DRAFT), flt)


def labelled_gain(flt: str = "") -> str:
    """Each counting process's accepted tokens per request-step over WINDOW, labelled with
    its deployment: what the alert compares (the end-to-end test reads it)."""
    from .. import signals as S
    return f"({_own(S.SPEC_ACCEPTED_TOKENS, flt)} / {_own(S.SPEC_DRAFTS, flt)})"


def alert_query(flt: str = "") -> str:
    """The rule in PromQL over the last WINDOW, per counting process: its accepted tokens
    per request-step over those of the other processes of its deployment pooled, kept
    where both sides pass the floor and it is DROP fewer; the alert compares it with
    `<= RATIO`."""
    from ..grafana import promql as Q
    from .. import signals as S
    by = f"{Q.DEPLOYMENT}, {Q.DRAFT}"

    def others(spec) -> str:  # the rest of its deployment, per process ("()": no labels)
        return (f"(sum by ({by}) ({_own(spec, flt)}) - on ({by}) group_right ()"
                f" {_own(spec, flt)})")
    gain = labelled_gain(flt)
    rest = f"({others(S.SPEC_ACCEPTED_TOKENS)} / {others(S.SPEC_DRAFTS)})"
    return (f"{gain} / {rest} and ({rest} - {gain} >= {DROP})"
            f" and ({_own(S.SPEC_DRAFTS, flt)} >= {FLOOR})"
            f" and ({others(S.SPEC_DRAFTS)} >= {FLOOR})")


ALERT = Alert(
    "SpectraceReplicaAcceptance",
    "One replica of {{ $labels.service_name }} accepts far less than the rest "
    "({{ $labels.instance }})",
    "Over the last hour, {{ $labels.instance }} accepted {{ $value | printf \"%.2f\" }}x "
    f"the draft tokens per request-step of the other replicas of its deployment "
    f"({{{{ $labels.service_name }}}}, draft {{{{ $labels.spectrace_draft_model }}}}) "
    f"together (at most {RATIO:g}x and {DROP:g} fewer, {FLOOR} request-steps each side): "
    f"one process gone wrong. The rule of `spectrace report`'s finding {CODE}; look at "
    "that process's findings (dropped weights, fc bypass, aux capture).",
    severity="warning", for_="15m", windowed=True, query=alert_query, op="<=",
    threshold=RATIO)

DOC = (
    f"`{CODE}` (warning) compares, within each deployment (the same `service.name` and "
    "draft), the replica that accepts least, with at least "
    f"{FLOOR} request-steps, with the deployment's other counting processes pooled (at least "
    f"{FLOOR} together): it is raised when its accepted draft tokens per request-step are at "
    f"most {RATIO:g}x theirs and {DROP:g} fewer (`spectrace/rules/replicas.py`). Data-parallel "
    "ranks with their own requests count as replicas, tensor-parallel copies do not. The "
    "alert `SpectraceReplicaAcceptance` restates it over the last hour, each process "
    "labelled from `target_info`. Floors and false alarms (`python "
    "benchmarks/replica_rule.py --runs 40`, simulated deployments of 2, 8, 32 and 125 "
    "replicas, each filled with whole requests to 1x or 4x the floor, K 3 or 5, mean "
    "per-position acceptance 0.3-0.85, requests alike or as mixed as a Beta of "
    "concentration 5; `benchmarks/results/replica-rule.json`): with the replicas' traffic "
    "alike, no false alarm in 4,800 runs; behind a router that keeps tenants on replicas "
    "(each replica's mean its own, a Beta of concentration 30), 1 in 4,800. At 0.25x that "
    "router gave 58 in 4,800, nearly all in deployments accepting little (mean 0.3): hence "
    "0.15x. A replica whose draft is not used accepts nothing and is found whenever both "
    "sides pass the floor; one accepting at 0.2x its per-position acceptance (mostly "
    "broken) in 88 % of runs.",
)

SPEC = FindingSpec(
    CODE, WARNING,
    "one replica of a deployment (the same service and draft) accepting far less than its "
    "other replicas pooled: one process gone wrong",
    floor=f"{FLOOR} request-steps of the replica and of the others together; its accepted "
          f"tokens per request-step at most {RATIO:g}x theirs and {DROP:g} fewer",
    alert=ALERT, message=MESSAGE, doc_title="One replica against its deployment", doc=DOC)


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
                process=worst.process, gain=f"{gain:.2f}", drafts=f"{worst.drafts:,.0f}",
                others_gain=f"{others:.2f}",
                others=("the other replica" if len(members) == 2 else
                        f"the other {len(members) - 1} replicas together"),
                deployment=", ".join(f"{WORDS.get(k, k)} {v}" for k, v in deployment)
                or "the deployment"))
    return out
