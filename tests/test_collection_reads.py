"""One fold per metric collection for all of a family's instruments
(`families.instruments.CollectionReads`): a snapshot's request-steps and accepted tokens
are of the same steps, even while the decode loop goes on counting during the collection.
Folded per callback, a step counted between two callbacks landed in one and not the other
(a killed server's last snapshot, or any scrape under traffic, could be a step apart)."""
from __future__ import annotations

import sys
import threading

from spectrace.families.instruments import CollectionReads


def test_the_first_callback_of_a_collection_folds_the_others_read_its_fold():
    folds = []

    def fold():
        folds.append(len(folds))
        return len(folds)
    reads = CollectionReads(fold)
    drafts, accepted = reads.reader(lambda n: n), reads.reader(lambda n: n)
    assert (drafts(), accepted()) == (1, 1)  # one collection: one fold
    assert (accepted(), drafts()) == (2, 2)  # a callback called again: the next collection
    assert drafts() == 3 and len(folds) == 3


def test_a_fold_that_raises_is_tried_again_by_the_next_callback():
    calls = []

    def fold():
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("a bad step")
        return "totals"
    reads = CollectionReads(fold)
    first, second = reads.reader(lambda t: t), reads.reader(lambda t: t)
    try:
        first()
    except ValueError:
        pass
    assert second() == "totals" and first() == "totals" and len(calls) == 2


def test_a_snapshot_under_traffic_counts_the_same_steps_in_every_instrument():
    """A real SDK collection while another thread counts steps that accept every draft
    token (so accepted tokens equal request-steps in any consistent snapshot), with thread
    switches made frequent."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from spectrace.config import Config
    from spectrace.export.providers import ProcessTelemetry
    from spectrace.recorder import Recorder

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    tel = ProcessTelemetry(resource=None, meter=provider.get_meter("t"), tracer=None,
                           events=None, directory=None)
    rec = Recorder(Config(), tel)
    stop = threading.Event()

    def decode_loop():
        while not stop.wait(0.00005):
            rec.acceptance.add([1, 1, 1], 1)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    loop = threading.Thread(target=decode_loop)
    loop.start()
    try:
        seen = []
        for _ in range(200):
            points = {m.name: sum(p.value for p in m.data.data_points)
                      for rm in reader.get_metrics_data().resource_metrics
                      for sm in rm.scope_metrics for m in sm.metrics}
            seen.append((points.get("spectrace.spec.drafts", 0),
                         points.get("spectrace.spec.accepted_tokens", 0),
                         points.get("spectrace.spec.accepted_tokens_per_position", 0)))
    finally:
        stop.set()
        loop.join()
        sys.setswitchinterval(switch)
        provider.shutdown()
    assert [s for s in seen if not s[0] == s[1] == s[2]] == []
    assert seen[-1][0] > seen[0][0]  # the loop counted during the collections
