"""The metrics file keeps a bounded, downsampled history (`spectrace.export.history`):
compaction keeps the newest snapshots and the oldest, spreads the rest over time, stays
within its bound over a simulated week, survives a SIGKILL in the middle, and both the
files it writes and plain snapshot-per-line files of earlier releases read the same."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from spectrace import signals
from spectrace.export import history
from spectrace.export.files import JsonlWriter
from spectrace.file_layout import METRICS_FILE, RESOURCE_FILE, SPANS_FILE
from spectrace.report import build_report, summarize_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def snapshot(t: float, drafts: int, pad: int = 0) -> dict:
    """A snapshot as the file exporter writes it (`time` first), cumulative totals."""
    m = {signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
         signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": drafts}],
         signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": 3 * drafts}]}
    if pad:
        m["pad"] = [{"attributes": {"x": "p" * pad}, "value": 0}]
    return {"time": t, "metrics": m}


def whole_lines(path) -> list[dict]:
    """Parsed without spectrace: every line must be whole JSON."""
    with open(path, "rb") as fh:
        data = fh.read()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


# -- what a compaction keeps -------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 400), min_size=1, max_size=300),
       gaps=st.lists(st.floats(0, 1000), min_size=300, max_size=300),
       limit=st.integers(200, 20_000))
def test_keep_indices_bounds(sizes, gaps, limit):
    times = [sum(gaps[:i]) for i in range(len(sizes))]
    keep = history.keep_indices(times, sizes, limit)
    assert keep == sorted(set(keep))
    assert keep[-1] == len(sizes) - 1                     # the newest is always kept
    recent = [i for i in keep if i == len(sizes) - 1 or sum(sizes[i:]) <= limit // 2]
    older = [i for i in keep if i not in recent]
    assert sum(sizes[i] for i in recent) <= max(limit // 2, sizes[-1])
    if older:
        assert older[0] == 0                               # the start of the run
        assert sum(sizes[i] for i in older) <= limit // 4 or older == [0]


def test_older_history_is_spread_evenly_over_time():
    n = 10_000
    keep = history.keep_indices([float(i) for i in range(n)], [100] * n, 100 * 1000)
    recent = [i for i in keep if i >= n - 500]
    older = [i for i in keep if i < n - 500]
    assert recent == list(range(n - 500, n))              # full resolution, newest half
    assert older[0] == 0 and 200 <= len(older) <= 250     # a quarter of the bound
    gaps = [b - a for a, b in zip(older, older[1:])]
    assert max(gaps) <= 2 * (n - 500) / len(older)        # evenly spread, no hole


def test_a_week_stays_bounded_and_keeps_its_start():
    """A week of snapshots at the default 2 s interval, each the size of a real one
    (2.5 KB), through the compaction rule (sizes and times only, as the writer's file
    would hold them)."""
    size, interval, week = 2500, 2.0, 7 * 24 * 3600
    times: list[float] = []
    sizes: list[int] = []
    total, largest, compactions = 0, 0, 0
    for k in range(int(week / interval)):
        times.append(k * interval)
        sizes.append(size)
        total += size
        largest = max(largest, total)
        if total > history.MAX_BYTES:
            keep = history.keep_indices(times, sizes, history.MAX_BYTES)
            times = [times[i] for i in keep]
            sizes = [sizes[i] for i in keep]
            total = sum(sizes)
            compactions += 1
    tail = len(times) - 1
    while tail > 0 and times[tail] - times[tail - 1] == interval:
        tail -= 1                                          # the full-resolution tail
    older = times[:tail + 1]
    spacing = (older[-1] - older[0]) / (len(older) - 1)
    print(f"\na week at 2 s: {compactions} compactions, file at most {largest / 2**20:.2f} "
          f"MiB, now {total / 2**20:.2f} MiB, {len(times)} snapshots; the last "
          f"{(times[-1] - times[tail]) / 60:.0f} min at full resolution, before that one "
          f"every {spacing / 60:.1f} min")
    assert largest <= history.MAX_BYTES + size
    assert times[0] == 0 and times[-1] == week - interval
    assert times[-1] - times[tail] > 50 * 60 and spacing < 30 * 60


# -- the writer ------------------------------------------------------------------------
def test_writer_compacts_past_its_bound_and_the_report_reads_it(tmp_path):
    d = tmp_path / "sglang-h-1"
    d.mkdir()
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": {"process.pid": 1}}))
    w = JsonlWriter(str(d / METRICS_FILE), "metrics", max_bytes=64 << 10)
    for k in range(2000):
        assert w.write(snapshot(1000.0 + k, 10 * k, pad=200))
    w.close()
    assert w.compactions >= 10
    size = os.path.getsize(d / METRICS_FILE)
    assert size <= (64 << 10) + 500
    lines = whole_lines(d / METRICS_FILE)
    assert lines[0]["time"] == 1000.0 and lines[-1]["time"] == 2999.0
    assert [x["time"] for x in lines] == sorted(x["time"] for x in lines)
    p = summarize_process(str(d))
    assert p.figures.drafts == 19990 and p.metric_snapshots == len(lines)
    tl = p.figures.timeline
    assert tl.time[0] == 1000.0 and tl.time[-1] == 2999.0
    # an interval over a coarse older stretch still gives the right ratio
    assert all(v == 2.0 for v in tl.mean_acceptance_length[1:])
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]


def test_spans_file_is_bounded_keeping_the_newest_spans(tmp_path, monkeypatch):
    """`spans.jsonl` has the same bound; a compaction keeps the newest spans (whole lines,
    in order, none older than one dropped) and the report counts the spans kept."""
    from spectrace import config
    from spectrace.export.providers import setup
    bound = 64 << 10
    monkeypatch.setattr(history, "MAX_BYTES", bound)
    tel = setup(config.from_env({}, output_dir=str(tmp_path), metric_interval_s=2), {},
                "scheduler")
    try:
        for k in range(1000):
            with tel.tracer.start_as_current_span("step", attributes={"k": k, "pad": "p" * 100}):
                pass
        for p in tel.span_processors:
            assert p.force_flush()
        path = os.path.join(tel.directory, SPANS_FILE)
        lines = whole_lines(path)
        assert os.path.getsize(path) <= bound + len(json.dumps(lines[-1])) + 1
        ks = [x["attributes"]["k"] for x in lines]
        assert ks == list(range(ks[0], 1000)) and ks[0] > 0   # the newest, none missing
        assert os.path.getsize(path) > bound // 2 - 2 * len(json.dumps(lines[-1]))
        assert summarize_process(tel.directory).spans == len(lines)
        assert not [n for n in os.listdir(tel.directory) if n.endswith(".tmp")]
    finally:
        tel.shutdown()


def test_previous_format_plain_snapshot_per_line(tmp_path):
    """A `metrics.jsonl` of an earlier release: a snapshot per line, uncompacted, with
    the spacing of `json.dumps` defaults and keys in another order."""
    d = tmp_path / "sglang-old-7"
    d.mkdir()
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": {"process.pid": 7}}))
    with open(d / METRICS_FILE, "w") as fh:
        for k in range(1, 6):
            s = snapshot(50.0 + 2 * k, 4 * k)
            fh.write(json.dumps({"metrics": s["metrics"], "time": s["time"]}) + "\n")
    p = build_report(str(tmp_path)).processes[0]
    assert p.figures.drafts == 20 and p.figures.accepted_tokens == 20 and p.metric_snapshots == 5
    assert p.figures.timeline.time == (52.0, 54.0, 56.0, 58.0, 60.0)
    assert p.figures.timeline.mean_acceptance_length == (None, 2.0, 2.0, 2.0, 2.0)
    # compaction only rewrites the file its own process writes (`time` first, compact
    # separators); it does not mistake a line of another layout for one of its own
    lines = open(d / METRICS_FILE, "rb").read().split(b"\n")[:-1]
    assert history.line_time(lines[0]) is None
    assert history.line_time(json.dumps(snapshot(5.5, 1), separators=(",", ":")).encode()) == 5.5


def test_an_earlier_reader_reads_a_compacted_file(tmp_path):
    """What `spectrace report` of the previous release did: the totals are the last
    complete line's metrics."""
    path = tmp_path / METRICS_FILE
    w = JsonlWriter(str(path), "metrics", max_bytes=8 << 10)
    for k in range(300):
        w.write(snapshot(float(k), k))
    w.close()
    assert w.compactions > 0
    last = whole_lines(path)[-1]
    assert last["metrics"][signals.SPEC_DRAFTS.name][0]["value"] == 299


WRITER = os.path.join(ROOT, "tests", "programs", "metrics_writer.py")


def test_sigkill_during_compaction_leaves_a_readable_file(tmp_path):
    """A real writer process, SIGKILLed while its compaction's temporary file exists: the
    metrics file is whole (the old one or the new one), the report reads it, and the
    leftover temporary file is ignored. Repeated until a kill landed mid-compaction."""
    path = str(tmp_path / "sglang-h-9" / METRICS_FILE)
    os.makedirs(os.path.dirname(path))
    kills_mid_compaction = 0
    for attempt in range(20):
        for name in os.listdir(os.path.dirname(path)):
            os.unlink(os.path.join(os.path.dirname(path), name))
        proc = subprocess.Popen([sys.executable, WRITER, path])
        tmp = os.path.join(os.path.dirname(path), f".{METRICS_FILE}.{proc.pid}.tmp")
        killed = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(tmp):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        proc.kill()
        proc.wait()
        if not (killed and os.path.exists(tmp)):
            continue
        kills_mid_compaction += 1
        lines = whole_lines(path)  # every line whole: the old file or the new one
        values = [x["metrics"]["spectrace.spec.drafts"][0]["value"] for x in lines]
        assert values == sorted(values) and len(values) >= 2
        p = summarize_process(os.path.dirname(path))
        assert p.figures.drafts == values[-1] and p.skipped_lines == 0
        out = subprocess.run([sys.executable, "-m", "spectrace.cli", "report",
                              os.path.dirname(path)], capture_output=True, text=True,
                             cwd=ROOT, timeout=60)
        assert out.returncode == 0, out.stderr
        if kills_mid_compaction >= 2:
            break
    assert kills_mid_compaction >= 2, "no kill landed during a compaction"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"{\"time\":1,\"m\":2}", b"", b"  ", b"\r", b"x y", b"\t{}"]),
                max_size=30), st.binary(max_size=8))
def test_whole_lines_are_the_lines_a_split_keeps(parts, tail):
    """The compaction finds lines as offsets into the mapped file (no copy per line); they
    are exactly the whole, non-blank lines a plain split keeps (the previous reading)."""
    data = b"\n".join(parts) + (b"\n" if parts else b"") + tail.replace(b"\n", b"")
    expected = [ln + b"\n" for ln in data.split(b"\n")[:-1] if ln.strip()]
    assert [data[s:e] for s, e in history.whole_lines(data)] == expected
    for (s, e), line in zip(history.whole_lines(data), expected):
        assert history.line_time(data, s, e) == history.line_time(line)
