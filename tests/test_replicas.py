"""`acceptance.replica_low` (spectrace/rules/replicas.py): the worst replica of a deployment
against its other replicas pooled, with its floor; deployments are never compared with each
other. Its end-to-end form, from a backfilled Prometheus through every view:
tests/test_prometheus_source.py::test_one_replica_accepting_far_less_than_the_rest; its
false alarms: benchmarks/replica_rule.py."""
from __future__ import annotations

import pytest

from spectrace.report import judgement
from spectrace.rules import replicas
from spectrace.rules.replicas import FLOOR, Replica

pytestmark = pytest.mark.fast

PROD = (("service.name", "prod"), ("spectrace.draft_model", "/m/v1"))
CANARY = (("service.name", "canary"), ("spectrace.draft_model", "/m/v2"))


def fleet(*gains_and_steps, deployment=PROD):
    """Replicas r0, r1, ... of one deployment from (accepted tokens per request-step,
    request-steps)."""
    return [Replica(f"r{i}", deployment, n, g * n) for i, (g, n) in enumerate(gains_and_steps)]


@pytest.mark.parametrize("replicas_of,fires", [
    (fleet((1.5, FLOOR), (1.5, FLOOR), (0.15, FLOOR)), True),      # 0.1x, 1.35 fewer
    (fleet((2.0, FLOOR), (0.3, FLOOR)), True),                      # 0.15x, 1.7 fewer: at it
    (fleet((2.0, FLOOR), (0.32, FLOOR)), False),                    # 0.16x: not at most 0.15x
    (fleet((0.32, FLOOR), (0.03, FLOOR)), False),                   # 0.1x, but 0.29 fewer
    (fleet((1.5, FLOOR), (0.1, FLOOR - 1)), False),                 # the replica under its floor
    (fleet((1.5, FLOOR // 2), (1.5, FLOOR // 2 - 1), (0.1, FLOOR)), False),  # the others too
    (fleet((1.5, FLOOR // 2), (1.5, FLOOR // 2), (0.1, FLOOR)), True),       # together: enough
    (fleet((0.1, FLOOR)), False),                                   # alone: no siblings
])
def test_the_rule_and_its_floor(replicas_of, fires):
    found = replicas.judge(replicas_of)
    assert bool(found) == fires
    if fires:
        [f] = found
        assert f.code == replicas.CODE and f.details["process"] == replicas_of[-1].process


def test_deployments_are_never_compared_with_each_other():
    """A canary serving a worse draft is not a replica gone wrong: it is another
    deployment (the comparison of two deployments is `--baseline-selector`'s)."""
    mixed = fleet((1.5, FLOOR), (1.5, FLOOR)) + fleet((0.3, FLOOR), deployment=CANARY)
    assert replicas.judge(mixed) == []
    broken = fleet((1.5, FLOOR), (1.5, FLOOR)) + fleet((1.5, FLOOR), (1.5, FLOOR), (0.1, FLOOR),
                                                       deployment=CANARY)
    [f] = replicas.judge(broken)
    assert f.details["deployment"] == dict(CANARY)
    assert "of deployment canary, draft /m/v2" in f.message


def test_the_judgement_declares_it_and_reads_the_views_members():
    """One line of `judgement.RULES`: its declaration, and its judge reading the members
    a view of several processes carries."""
    assert judgement.SPECS[replicas.CODE] is replicas.SPEC
    assert judgement.Evidence.__dataclass_fields__["members"].default == ()
