"""`spectrace report` on bad input: an unusable folder gives exit status 2 and a one-line
message; truncated, empty, huge and malformed files inside a usable folder give a robust
summary (bad lines skipped and counted). Property tests feed `read_jsonl` and the report
random bytes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectrace import signals
from spectrace.file_layout import EVENTS_FILE, METRICS_FILE, RESOURCE_FILE, SPANS_FILE
from spectrace.report.reader import iter_jsonl, read_jsonl
from spectrace.report import build_report, render_text, summarize_process
from spectrace.report.html import render_html

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "spectrace.cli", "report", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def snapshot(drafts=10, accepted=10, steps=3) -> dict:
    return {"time": 1.0, "metrics": {
        signals.SPEC_DRAFTS.name: [{"attributes": {}, "value": drafts}],
        signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": accepted}],
        signals.SPEC_DRAFT_TOKENS.name: [{"attributes": {}, "value": drafts * steps}],
        signals.SPEC_ACCEPTED_PER_POSITION.name: [
            {"attributes": {"position": 0}, "value": accepted}],
        signals.SPEC_ACCEPT_LENGTH.name: [{"attributes": {"length": 2}, "value": drafts}],
    }}


def process(tmp_path, name="sglang-h-1", **files) -> str:
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    (d / RESOURCE_FILE).write_text(json.dumps({"attributes": {"process.pid": 1}}))
    for fname, content in files.items():
        path = d / {"metrics": METRICS_FILE, "events": EVENTS_FILE, "spans": SPANS_FILE,
                    "resource": RESOURCE_FILE}[fname]
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(d)


def lines(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


@pytest.mark.parametrize("folder", ["advisor/full-k3", "request_label/planted", "drift/moved"])
def test_the_live_tests_in_process_report_is_the_commands_json(folder):
    """`conftest.report_json` (what the live tests poll) prints what `spectrace report
    --json` prints, on recorded folders of one process and of several."""
    from conftest import report_json
    path = os.path.join(ROOT, "tests", "recorded", *folder.split("/"))
    out = cli(path, "--json")
    assert out.returncode == 0, out.stderr
    assert report_json(path) == json.loads(out.stdout)


# -- unusable input: exit 2, one line ------------------------------------------------
def test_missing_folder_exit_2_one_line(tmp_path):
    out = cli(tmp_path / "nope")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "no such folder" in out.stderr


def test_file_instead_of_folder_exit_2_one_line(tmp_path):
    f = tmp_path / "metrics.jsonl"
    f.write_text(lines(snapshot()))
    out = cli(f)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "is a file, not a folder" in out.stderr


def test_empty_folder_is_usable_and_says_so(tmp_path):
    out = cli(tmp_path)
    assert out.returncode == 0
    assert "no instrumented process has written here yet" in out.stdout


# -- robust summaries -------------------------------------------------------------------
def test_truncated_last_line_is_skipped_and_totals_come_from_last_complete(tmp_path):
    torn = json.dumps(snapshot(drafts=99, accepted=99))[:-7]
    d = process(tmp_path, metrics=lines(snapshot(5, 5), snapshot(10, 7)) + torn)
    p = summarize_process(d)
    assert p.figures.drafts == 10 and p.figures.accepted_tokens == 7
    assert p.metric_snapshots == 2 and p.skipped_lines == 1
    out = cli(tmp_path, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["processes"][0]["drafts"] == 10


def test_empty_files(tmp_path):
    d = process(tmp_path, metrics="", events="", spans="", resource="")
    p = summarize_process(d)
    assert p.figures.drafts == 0 and p.metric_snapshots == 0 and p.pid is None
    assert cli(tmp_path).returncode == 0


GARBAGE_LINES = [
    b"not json\n", b"[1, 2, 3]\n", b'"string"\n', b"\xff\xfe\x00garbage\n",
    b'{"metrics": "oops"}\n', b'{"metrics": {"spectrace.spec.drafts": "x"}}\n',
    b'{"metrics": {"spectrace.spec.drafts": [1, null, {"value": "7"}]}}\n',
    b'{"metrics": {"spectrace.spec.drafts": [{"value": NaN}]}}\n',
    b'{"metrics": {"spectrace.spec.drafts": [{"value": 1e999}]}}\n',
    b"[" * 100_000 + b"\n",                           # exhausts a recursive parser
    b'{"n": ' + b"9" * 10_000 + b"}\n",                # int too long for Python to parse
    b"\n", b"   \n",
]


def test_garbage_lines_between_good_ones(tmp_path):
    good = lines(snapshot(4, 4)).encode()
    weird = {"time": 2, "metrics": {
        signals.SPEC_DRAFTS.name: [{"attributes": [1], "value": 10}, {"value": True}, "x"],
        signals.SPEC_ACCEPTED_TOKENS.name: [{"attributes": {}, "value": 5}],
        signals.SPEC_DRAFT_TOKENS.name: [{"value": 30}],
        signals.SPEC_ACCEPTED_PER_POSITION.name: [
            {"attributes": {"position": [0]}, "value": 3}, {"attributes": {"position": "1"},
                                                             "value": 2},
            {"attributes": {"position": 0}, "value": 3}, {"attributes": "x", "value": 1}],
        signals.SPEC_ACCEPT_LENGTH.name: [{"attributes": {"length": "abc"}, "value": 1},
                                          {"attributes": {"length": 2}, "value": 9}],
        signals.EAGLE3_PASSES.name: [{"attributes": {"pass_kind": {}, "width": 3}, "value": 1}],
        signals.EAGLE3_EXPECTED_WIDTH.name: [{"attributes": {"kind": None}, "value": 1}],
    }}
    metrics = good + b"".join(GARBAGE_LINES) + lines(weird).encode() + GARBAGE_LINES[0]
    events = (lines({"code": "eagle3.fc_bypass", "severity": "error", "message": "m"},
                    {"code": 5}, {"code": "x", "severity": ["no"], "message": {"a": 1}})
              .encode() + b"garbage\n")
    d = process(tmp_path, metrics=metrics, events=events, spans=b"{}\n" + b"\x00\n")
    p = summarize_process(d)
    v = p.figures
    assert v.drafts == 10 and v.accepted_tokens == 5 and v.draft_tokens == 30
    assert v.accepted_per_position == (3, 2)
    assert v.accept_length_counts == {"2": 9, "abc": 1}
    assert {f.code for f in p.findings} == {"eagle3.fc_bypass", "x"}
    assert p.spans == 1
    assert p.skipped_lines >= len(GARBAGE_LINES) - 2
    text = render_text(build_report(str(tmp_path)))
    assert "request-steps verified 10" in text and "skipped" in text
    out = cli(tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)


def test_huge_line_is_skipped_without_loading_it(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(lines({"a": 1}).encode() + b'{"pad": "' + b"x" * 5000 + b'"}\n'
                     + lines({"b": 2}).encode() + b'{"c": 3')
    stats: dict = {}
    assert list(iter_jsonl(str(path), stats, max_line=1000)) == [{"a": 1}, {"b": 2}]
    assert stats == {"skipped": 1, "torn": 1}


def test_huge_files_through_the_cli(tmp_path):
    """A 20 MiB line (over the 16 MiB line limit) and a 20 MiB resource.json."""
    d = tmp_path / "sglang-h-2"
    d.mkdir()
    with open(d / METRICS_FILE, "wb") as fh:
        fh.write(lines(snapshot(3, 3)).encode())
        fh.write(b'{"metrics": {"pad": "' + b"x" * (20 << 20) + b'"}}\n')
    with open(d / RESOURCE_FILE, "wb") as fh:
        fh.write(b'{"attributes": {"pad": "' + b"x" * (20 << 20) + b'"}}')
    out = cli(tmp_path, "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)["processes"][0]
    assert p["drafts"] == 3 and p["skipped_lines"] == 1


def test_fifo_and_device_files_do_not_hang(tmp_path):
    d = tmp_path / "sglang-h-3"
    d.mkdir()
    os.mkfifo(d / METRICS_FILE)
    os.symlink("/dev/zero", d / SPANS_FILE)
    (d / EVENTS_FILE).write_text(lines({"code": "c", "severity": "info", "message": "m"}))
    out = cli(tmp_path, "--json", timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["processes"][0]["findings"][0]["code"] == "c"


def test_a_process_folder_can_be_given_directly(tmp_path):
    d = process(tmp_path, metrics=lines(snapshot(6, 6)))
    out = cli(d, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["processes"][0]["drafts"] == 6


# -- property tests ---------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)
metric_names = st.sampled_from([m.name for m in signals.ALL_METRICS])
points = st.lists(st.one_of(json_values, st.fixed_dictionaries({
    "attributes": st.one_of(json_values, st.dictionaries(
        st.sampled_from(["position", "length", "pass_kind", "width", "kind", "code"]),
        json_values, max_size=3)),
    "value": json_values})), max_size=4)
snapshots = st.fixed_dictionaries({"metrics": st.one_of(
    json_values, st.dictionaries(metric_names, st.one_of(points, json_values), max_size=6))})
file_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(snapshots, json_values).map(
        lambda o: json.dumps(o).encode() + b"\n"), max_size=5).map(b"".join),
    st.tuples(st.binary(max_size=50), st.binary(max_size=50)).map(lambda t: t[0] + b"\n" + t[1]))

PROPS = settings(max_examples=150, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


@PROPS
@given(data=st.binary(max_size=2000))
def test_read_jsonl_on_random_bytes(tmp_path, data):
    path = tmp_path / "random.jsonl"
    path.write_bytes(data)
    out = read_jsonl(str(path))
    assert all(isinstance(o, dict) for o in out)
    assert len(out) <= data.count(b"\n")


@PROPS
@given(metrics=file_bytes, events=file_bytes, spans=file_bytes, resource=file_bytes)
def test_report_on_random_files(tmp_path, metrics, events, spans, resource):
    d = tmp_path / "sglang-h-9"
    d.mkdir(exist_ok=True)
    for name, data in ((METRICS_FILE, metrics), (EVENTS_FILE, events), (SPANS_FILE, spans),
                       (RESOURCE_FILE, resource)):
        (d / name).write_bytes(data)
    p = summarize_process(str(d))   # no catch-all: any exception here is a bug
    assert isinstance(p.figures.drafts, (int, float))
    rep = build_report(str(tmp_path))
    render_text(rep)
    json.dumps(rep.to_json())
    render_html(rep)                  # the page too (its data must be strict JSON)


# -- timeline, several processes together, width verdicts --------------------------------
def timed(t, drafts, accepted, steps=3) -> dict:
    s = snapshot(drafts, accepted, steps)
    s["time"] = t
    return s


def test_timeline_gives_each_interval_its_own_figures(tmp_path):
    d = process(tmp_path, metrics=lines(timed(10.0, 0, 0), timed(12.0, 10, 20), timed(14.0, 10, 20),
                                        timed(16.0, 20, 25), timed(15.0, 30, 30),
                                        {"time": "x", "metrics": {}}, timed(18.0, 5, 5)))
    tl = summarize_process(d).figures.timeline
    assert tl.time == (10.0, 12.0, 14.0, 16.0, 15.0, 18.0)    # a line without a time: none
    assert tl.drafts == (0, 10, 10, 20, 30, 5)
    # 1 + accepted/drafts and accepted/draft tokens within each interval; None where nothing
    # was verified, where time went back, or where a total went down
    assert tl.mean_acceptance_length == (None, 3.0, None, 1.5, None, None)
    assert tl.acceptance_rate == (None, 20 / 30, None, 5 / 30, None, None)


def test_a_long_uncompacted_file_is_thinned_for_the_timeline(tmp_path):
    from spectrace.report.snapshot import MAX_POINTS
    d = process(tmp_path, metrics=lines(*(timed(float(k), k, k) for k in range(5 * MAX_POINTS))))
    p = summarize_process(d)
    tl = p.figures.timeline
    assert MAX_POINTS <= len(tl.time) < 2 * MAX_POINTS
    assert tl.time[0] == 0.0 and tl.time[-1] == 5 * MAX_POINTS - 1   # ends kept
    assert p.figures.drafts == 5 * MAX_POINTS - 1
    assert set(tl.mean_acceptance_length[1:]) == {2.0}


def test_processes_together(tmp_path):
    a = process(tmp_path, "sglang-h-1", metrics=lines(timed(10.0, 0, 0), timed(20.0, 10, 10)),
                events=lines({"time": 15.0, "code": "eagle3.fc_bypass", "severity": "error",
                              "message": "m"}))
    process(tmp_path, "sglang-h-2", metrics=lines(timed(12.0, 4, 0), timed(22.0, 14, 0)),
            events=lines({"time": 13.0, "code": "eagle3.fc_bypass", "severity": "error",
                          "message": "m"}))
    rep = build_report(str(tmp_path))
    assert rep.combined.processes == ("sglang-h-1", "sglang-h-2")
    c = rep.combined.figures
    assert c.drafts == 24 and c.accepted_tokens == 10 and c.draft_tokens == 72
    assert c.mean_acceptance_length == 1 + 10 / 24
    assert c.accepted_per_position == (10,)
    # at each time either process wrote, the sum of both latest totals
    assert c.timeline.time == (10.0, 12.0, 20.0, 22.0)
    assert c.timeline.drafts == (0, 4, 14, 24)
    assert c.timeline.accepted_tokens == (0, 0, 10, 10)
    f = rep.combined.findings[0]
    assert f.code == "eagle3.fc_bypass" and f.events == 2
    assert f.times == (13.0, 15.0) and f.first_time == 13.0
    # the working sums the combined view adds up are not part of --json
    as_json = rep.to_json()["processes"][0]
    assert "raw" not in as_json and "points" not in as_json and as_json["drafts"] == 10
    text = render_text(rep)
    assert "all 2 processes together" in text and "request-steps verified 24" in text
    assert summarize_process(a).findings[0].first_time == 15.0


def test_widths_are_judged_against_what_the_draft_expects(tmp_path):
    expected = [{"attributes": {"kind": k}, "value": v} for k, v in
                (("fc_in", 384), ("draft_hidden", 128), ("target_hidden", 128), ("num_aux", 3))]
    passes = [{"attributes": {"pass_kind": k, "width": w}, "value": n} for k, w, n in
              (("target_fed", 128, 5), ("target_fed", 256, 1), ("target_fed", 384, 2),
               ("draft_decode", 128, 9))]
    s = snapshot()
    s["metrics"][signals.EAGLE3_EXPECTED_WIDTH.name] = expected
    s["metrics"][signals.EAGLE3_PASSES.name] = passes
    d = process(tmp_path, metrics=lines(s))
    judged = {(x.pass_kind, x.width): (x.expected, x.finding)
              for x in summarize_process(d).figures.hidden_state_passes}
    assert judged == {("target_fed", 128): (384, signals.FC_BYPASS),
                      ("target_fed", 256): (384, signals.WIDTH_MISMATCH),
                      ("target_fed", 384): (384, None),
                      ("draft_decode", 128): (128, None)}


def test_html_to_an_unwritable_path_exit_2_one_line(tmp_path):
    d = process(tmp_path, metrics=lines(snapshot()))
    out = cli(d, "--html", tmp_path / "no" / "such" / "folder" / "r.html")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "--html" in out.stderr and "cannot write" in out.stderr


def test_html_of_an_empty_folder_says_so(tmp_path):
    (tmp_path / "data").mkdir()
    out = cli(tmp_path / "data", "--html", tmp_path / "r.html")
    assert out.returncode == 0 and "wrote" in out.stdout
    page = (tmp_path / "r.html").read_text()
    assert "No instrumented process has written here yet" in page
    assert oct(os.stat(tmp_path / "r.html").st_mode & 0o777) == "0o600"


def test_read_findings_returns_findings_per_process(tmp_path):
    """What an embedder asserts on: every code each process wrote, as a `Finding`."""
    from spectrace.findings import Finding
    from spectrace.report import read_findings
    for pid, code in ((1, "eagle3.fc_bypass"), (2, "aux.capture_disabled")):
        proc = tmp_path / f"sglang-h-{pid}"
        proc.mkdir()
        for n in (1, 2):
            with open(proc / EVENTS_FILE, "a") as fh:
                fh.write(json.dumps({"time": n, "occurrence": n, "code": code,
                                     "severity": "error", "message": f"{code} m",
                                     "details": {"n": n}}) + "\n")
    found = read_findings(str(tmp_path))
    assert found == [
        Finding("eagle3.fc_bypass", "error", "eagle3.fc_bypass m",
                {"n": 1, "process": "sglang-h-1"}),
        Finding("aux.capture_disabled", "error", "aux.capture_disabled m",
                {"n": 1, "process": "sglang-h-2"})]
    assert read_findings(str(tmp_path / "sglang-h-1"))[0].code == "eagle3.fc_bypass"


def test_text_html_and_watch_word_the_same_figures_the_same_way(tmp_path):
    from spectrace.report.watch import health
    resource = {"attributes": {"process.pid": 2, signals.RES_ROLE: "engine_core",
                               signals.RES_RUNTIME: "vllm", signals.RES_RUNTIME_VERSION: "0.32"}}
    process(tmp_path, "vllm-h-2", metrics=lines(snapshot()), resource=json.dumps(resource))
    rep = build_report(str(tmp_path))
    text, page = render_text(rep), render_html(rep)
    # no tp rank (vLLM's engine core has none): neither view makes one up
    assert "process vllm-h-2 (pid 2, role engine_core, vLLM 0.32)" in text
    assert "<p class=meta>pid 2, role engine_core, model -, draft -, vLLM 0.32</p>" in page
    red = signals.ACCEPT_LENGTH_RED_BELOW
    assert f"below {red}: no speed-up</span>" in page and "no gain" not in page
    assert health(1.0) == ("no speed-up", "bold red")
    assert health(signals.ACCEPT_LENGTH_AMBER_BELOW) == ("healthy", "bold green")


def test_every_record_field_reaches_the_json_in_order(tmp_path):
    """`--json` is written key by key by each record's `to_json()`: a field added to a
    record and not to its `to_json` (or put in another place) fails here. Only the working
    sums the combined view adds up (`raw`, `points`) stay out."""
    from dataclasses import fields

    from spectrace.report.records import (
        CombinedSummary, Figures, FindingSummary, HiddenStatePass, ProcessSummary,
        TimelineFigures)

    def names(cls, leave_out=()):
        return [f.name for f in fields(cls) if f.name not in leave_out]

    s = snapshot()
    s["metrics"][signals.EAGLE3_PASSES.name] = [
        {"attributes": {"pass_kind": "target_fed", "width": 128}, "value": 2}]
    s["metrics"][signals.FINDINGS.name] = [{"attributes": {"code": "eagle3.fc_bypass"},
                                            "value": 2}]
    for name in ("sglang-h-1", "sglang-h-2"):
        process(tmp_path, name, metrics=lines(s), events=lines(
            {"time": 1.0, "code": "eagle3.fc_bypass", "severity": "error", "message": "m"}))
    rep = build_report(str(tmp_path))
    out = json.loads(cli(tmp_path, "--json").stdout)
    assert out == json.loads(json.dumps(rep.to_json()))
    assert list(out) == ["verdict", "directory", "settings", "processes", "combined",
                         "groups"]
    assert out["groups"] == []  # one deployment: no group of its own
    from spectrace.families.breakdowns import BREAKDOWNS
    figures = names(Figures)
    at = figures.index("breakdowns")  # one `by_<name>` key per declared breakdown
    figures[at:at + 1] = [f"by_{b.name}" for b in BREAKDOWNS]
    # the view's findings (judged apart from the figures) where --json has always had them
    figures.insert(figures.index("timeline"), "findings")
    proc, combined = out["processes"][0], out["combined"]
    assert list(proc) == names(ProcessSummary, ("figures", "findings", "raw", "points",
                                                "request_sample", "drift_history",
                                                "reference")) + figures
    # the fleet's view; a deployment's (`Report.groups`) leads with its group and verdict
    assert list(combined) == names(CombinedSummary, ("figures", "findings", "group",
                                                     "verdict")) + figures
    for view in (proc, combined):
        assert list(view["timeline"]) == names(TimelineFigures)
        assert list(view["hidden_state_passes"][0]) == names(HiddenStatePass)
        assert list(view["findings"][0]) == names(FindingSummary)   # with its metric count


def test_help_texts_are_whole():
    """`spectrace --help` and each command's help describe it in whole sentences (the
    description once ended mid-sentence: the docstring's first line)."""
    for argv in (["--help"], ["report", "--help"], ["doctor", "--help"]):
        out = subprocess.run([sys.executable, "-m", "spectrace.cli", *argv],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        text = out.stdout.split("positional arguments")[0]
        prose = " ".join(text.split("\n\n", 1)[1].split())  # after the usage lines
        assert prose.endswith("."), (argv, prose)
