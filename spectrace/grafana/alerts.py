"""Prometheus alert rules. Each expression is `(query) OP threshold`, so the query alone
can be evaluated to see the value an alert compares (the end-to-end test does that).

Rules on request-steps and draft passes (acceptance, the breakdowns' rules such as long
context and large batches, fc bypass, width mismatch) fire once
per counting process (`counted!="copy"`: one per data-parallel group, not one per
tensor-parallel rank); rules on what each process loads or raises (weights, vocabulary
map, internal errors) fire per process that has the problem."""
from __future__ import annotations

from .. import signals as S
from ..families.breakdowns import (BATCH_SIZE, BREAKDOWNS, PREFIX_CACHE, REQUEST_LABEL,
                                   Breakdown)
from ..families.findings import RUNTIME_SPECS
from ..findings import Alert
from ..rules import context as CTX
from ..rules import drift as DRIFT
from ..rules import replicas as REPLICA
from ..rules import speculation as SPEED

from . import promql as Q

BY = Q.SCRAPE_LABELS
GAP_WINDOW = "1h"  # the breakdowns' rules count an hour (their floor of request-steps a bucket)
SLOWER = SPEED.SLOWER.alert.name  # the alert names are declared with their findings
SPEEDUP_WINDOW = SPEED.SLOWER.alert.for_  # the speed-up rule's window (and how long it holds)
DRIFT_ALERT = DRIFT.SPEC.alert.name
DRIFT_RECENT, DRIFT_EARLIER = f"{DRIFT.RECENT_S // 60}m", f"{DRIFT.EARLIER_S // 3600}h"


def _rule(name, query, op, threshold, for_, severity, summary, description) -> dict:
    return {"alert": name, "expr": f"({query}) {op} {threshold}", "for": for_,
            "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description}}


def _declared(a: Alert, query: str, op: str, threshold) -> dict:
    """The rule of a declared alert: its words, severity and duration from `a`."""
    return _rule(a.name, query, op, threshold, a.for_, a.severity, a.summary, a.description)


def finding_alerts(flt: str = "") -> list[dict]:
    """The run-time findings' alerts, in their declarations' order, each once (several codes
    may share one): each fires at the first count of its counters, or at the first finding
    of its codes (by code where several share it)."""
    codes: dict[str, list[str]] = {}
    alerts: dict[str, Alert] = {}
    for spec in RUNTIME_SPECS:
        if spec.alert is not None:
            alerts.setdefault(spec.alert.name, spec.alert)
            codes.setdefault(spec.alert.name, []).append(spec.code)
    out = []
    for name, a in alerts.items():
        if a.windowed:  # its query compares windows: written here by hand, as drift's is
            raise ValueError(f"alert {name} of a run-time finding is windowed: "
                             "spectrace.grafana.alerts has no query for it")
        if a.counts:
            query = " + ".join(Q.stotal(S.METRICS_BY_NAME[c], BY, flt) for c in a.counts)
        else:
            matcher = "|".join(c.replace(".", "\\\\.") for c in codes[name])
            several = len(codes[name]) > 1
            query = Q.stotal(S.FINDINGS, BY + ((S.ATTR_CODE,) if several else ()), flt,
                             extra=(f'{S.ATTR_CODE}=~"{matcher}"' if several
                                    else f'{S.ATTR_CODE}="{codes[name][0]}"'))
        out.append(_declared(a, query, ">", 0))
    return out


def rules(flt: str = "") -> dict:
    """The rule group; `flt`: label matchers every series must also match (a deployment's
    job, namespace, ...)."""
    collapse = _rule(
        "SpectraceAcceptanceCollapse", Q.mean_acceptance_length("5m", BY, flt), "<",
        S.ACCEPT_LENGTH_RED_BELOW, "10m",
        "critical", "Speculative decoding gains nothing on {{ $labels.instance }}",
        "Mean acceptance length is {{ $value | printf \"%.2f\" }} (1.0 = no gain; healthy "
        "EAGLE-3 chains give 2-3.5). Check fc bypass, aux layer ids, d2t and dropped "
        "weights on the overview dashboard.")
    position0 = _rule(
        "SpectracePositionZeroCollapse",
        Q.per_position_acceptance("5m", BY, flt, extra=f'{S.ATTR_POSITION}="0"'), "<",
        S.POSITION0_RED_BELOW,
        "10m", "warning", "First draft token rarely accepted on {{ $labels.instance }}",
        "Position-0 acceptance is {{ $value | printf \"%.2f\" }}; broken drafts show under "
        "0.15 (e.g. d2t never loaded).")
    slower = _declared(SPEED.SLOWER.alert, f"{Q.estimated_speedup(SPEEDUP_WINDOW, flt)} and on() "
                       f"{Q.speedup_floor(SPEEDUP_WINDOW, flt)}", "<", 1)
    drifted = _declared(DRIFT.SPEC.alert, Q.acceptance_drift(DRIFT_RECENT, DRIFT_EARLIER, BY,
                                                             flt), "<=", DRIFT.RATIO)
    internal = _rule(
        "SpectraceInternalErrors", Q.stotal(S.INTERNAL_ERRORS, BY, flt),
        ">", 0, "0m", "warning", "spectrace hooks raised errors on {{ $labels.instance }}",
        "spectrace caught {{ $value }} exceptions in its hooks since the process started "
        "(the runtime ran normally, but some signals may be missing). The log names the "
        "hook.")
    return {"groups": [{"name": "spectrace", "interval": "30s",
                        "rules": [collapse, position0, *gap_rules(flt), *finding_alerts(flt),
                                  slower, drifted, *report_alerts(flt), internal]}]}


def report_alerts(flt: str = "") -> list[dict]:
    """The alerts the report's findings declare with their query (`Alert.query`), in
    `judgement.RULES` order: each written beside its rule."""
    from ..report.judgement import SPECS
    return [_declared(s.alert, s.alert.query(flt), s.alert.op, s.alert.threshold)
            for s in SPECS.values() if s.alert is not None and s.alert.query is not None]


def gap_rules(flt: str = "") -> list[dict]:
    """One rule per breakdown that declares an alert (`b.alert_rule`; the sampling breakdown
    declares none: sampled requests accept less by construction)."""
    return [_gap_rule(b, flt) for b in BREAKDOWNS if b.alert_rule is not None]


def _gap_rule(b: Breakdown, flt: str = "") -> dict:
    return _declared(b.alert_rule, Q.gap_acceptance(b, GAP_WINDOW, BY, flt), "<=", b.rule.ratio)


# -- promtool unit tests of the rules (synthetic series; `promtool test rules`) ------------
INSTANCE = {"job": "sglang", "instance": "10.0.0.1:9464"}
COPY = {"job": "sglang", "instance": "10.0.0.1:9465"}  # tensor-parallel rank 1 of INSTANCE


def _series(spec: S.MetricSpec, values: str, **labels) -> dict:
    matchers = ", ".join(f'{k}="{v}"' for k, v in {**INSTANCE, **labels}.items())
    return {"series": f"{spec.prometheus_name}{{{matchers}}}", "values": values}


def _with_copy(series: list[dict]) -> list[dict]:
    """`series` as rank 0 (`counted="once"`) plus the same values from its tensor-parallel
    copy (`counted="copy"`, on the next port) for every `counted_once` metric."""
    once_names = {m.prometheus_name for m in S.ALL_METRICS if m.counted_once}
    out = []
    for x in series:
        if x["series"].split("{", 1)[0] not in once_names:
            out.append(x)
            continue
        out.append({**x, "series": x["series"][:-1] + f', {S.ATTR_COUNTED}="once"}}'})
        out.append({**x, "series": x["series"][:-1].replace(INSTANCE["instance"],
                                                            COPY["instance"])
                    + f', {S.ATTR_COUNTED}="copy"}}'})
    return out


def _render(text: str, labels: dict, value: float) -> str:
    """The few template forms the rules use, as Prometheus renders them."""
    for k, v in labels.items():
        text = text.replace("{{ $labels.%s }}" % k, str(v))
    text = text.replace('{{ $value | printf "%.2f" }}', f"{value:.2f}")
    return text.replace("{{ $value }}", f"{value:g}")


def _expect(rule: dict, value: float, **labels) -> dict:
    all_labels = {**INSTANCE, **labels}
    return {"exp_labels": {**all_labels, **rule["labels"]},
            "exp_annotations": {k: _render(v, all_labels, value)
                                for k, v in rule["annotations"].items()}}


def _bucket(b: Breakdown, bucket: str, per_minute: dict[int, float], **labels) -> list[dict]:
    """A breakdown bucket's series: request-steps per minute by accept length, and the
    accepted draft tokens they make (accept length - 1 each)."""
    tokens = sum((length - 1) * n for length, n in per_minute.items())
    at = {b.attribute: bucket}
    return [_series(b.accept_length, f"0+{n:g}x90", **at, length=str(length), **labels)
            for length, n in per_minute.items()] + [
        _series(b.accepted_tokens, f"0+{tokens:g}x90", **at, **labels)]


def _context(bucket: str, per_minute: dict[int, float], **labels) -> list[dict]:
    return _bucket(BREAKDOWNS[0], bucket, per_minute, **labels)


def _large_batch_test(rule: dict) -> dict:
    """The batch-size rule (floor 1000 request-steps an hour: 20 a minute are 1200): fires
    on a fall from batch 1 to 64-127, not on one under the floor, not on a small one."""
    b, floor_ok = BATCH_SIZE, 20
    def at(n: int) -> dict:
        return _at(1, n)
    series = [
        # 1.5 accepted a request-step at batch 1, 0.5 at 64-127: a third, 1.0 fewer
        *_bucket(b, "1", {2: floor_ok / 2, 3: floor_ok / 2}, **at(1)),
        *_bucket(b, "8-15", {2: floor_ok}, **at(1)),
        *_bucket(b, "64-127", {1: floor_ok / 2, 2: floor_ok / 2}, **at(1)),
        # the same fall, the large bucket under the floor (600 an hour)
        *_bucket(b, "1", {2: floor_ok / 2, 3: floor_ok / 2}, **at(2)),
        *_bucket(b, "64-127", {1: 5, 2: 5}, **at(2)),
        # 1.5 against 1.2: 0.8 of it, 0.3 fewer (not at most 0.7)
        *_bucket(b, "1", {2: floor_ok / 2, 3: floor_ok / 2}, **at(3)),
        *_bucket(b, "64-127", {2: floor_ok * 0.8, 3: floor_ok * 0.2}, **at(3))]
    return _gap_test(rule, series, _expect(rule, 0.5 / 1.5, batch_size_bucket="64-127",
                                           instance=at(1)["instance"]))


def _at(net: int, n: int) -> dict:
    """A deployment of its own (instance 10.0.NET.N), counted once."""
    return {"instance": f"10.0.{net}.{n}:9464", S.ATTR_COUNTED: S.COUNTED_ONCE}


def _gap_test(rule: dict, series: list[dict], fires: dict) -> dict:
    """A gap rule's case: nothing at 30m (the buckets under the floor), `fires` at 70m."""
    return {"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "30m", "alertname": rule["alert"], "exp_alerts": []},
        {"eval_time": "70m", "alertname": rule["alert"], "exp_alerts": [fires]}]}


def _label_test(rule: dict) -> dict:
    """The request-label rule (floor 5000 request-steps an hour: 100 a minute are 6000;
    best against worst, no order): fires on the worst label of three, not on a fall under
    the floor, nor on one of 0.6x, nor on one of a half but under 0.5 tokens."""
    b = REQUEST_LABEL
    def at(n: int) -> dict:
        return _at(2, n)
    series = [
        # 1.5 accepted a request-step for chat, 1.2 for code, 0.5 for math
        *_bucket(b, "chat", {2: 50, 3: 50}, **at(1)), *_bucket(b, "code", {2: 80, 3: 20}, **at(1)),
        *_bucket(b, "math", {1: 50, 2: 50}, **at(1)),
        # the same fall, math under the floor (4800 an hour)
        *_bucket(b, "chat", {2: 50, 3: 50}, **at(2)), *_bucket(b, "math", {1: 40, 2: 40}, **at(2)),
        # 1.5 against 0.9: 0.6 of it
        *_bucket(b, "chat", {2: 50, 3: 50}, **at(3)), *_bucket(b, "math", {1: 10, 2: 90}, **at(3)),
        # 0.8 against 0.35: under half, but 0.45 fewer
        *_bucket(b, "chat", {1: 20, 2: 80}, **at(4)), *_bucket(b, "math", {1: 65, 2: 35}, **at(4))]
    return _gap_test(rule, series, _expect(rule, 0.5 / 1.5, **{b.attribute: "math"},
                                           instance=at(1)["instance"]))


def _prefix_cache_test(rule: dict) -> dict:
    """The prefix-cache rule (floor 5000 request-steps an hour: 100 a minute are 6000;
    `none` against the last hit bucket past the floor): fires on a fall at >=50%, on one
    at <50% when >=50% is under the floor, not on a fall under the floor, nor on hits
    accepting more, nor on one of 0.6x."""
    b = PREFIX_CACHE
    def at(n: int) -> dict:
        return _at(3, n)
    series = [
        # 1.5 accepted a request-step uncached, 1.2 at <50%, 0.5 at >=50%
        *_bucket(b, "none", {2: 50, 3: 50}, **at(1)), *_bucket(b, "<50%", {2: 80, 3: 20}, **at(1)),
        *_bucket(b, ">=50%", {1: 50, 2: 50}, **at(1)),
        # the same fall, >=50% under the floor (4800 an hour)
        *_bucket(b, "none", {2: 50, 3: 50}, **at(2)), *_bucket(b, ">=50%", {1: 40, 2: 40}, **at(2)),
        # hits accepting more (0.5 uncached, 1.5 cached): no fault
        *_bucket(b, "none", {1: 50, 2: 50}, **at(3)), *_bucket(b, ">=50%", {2: 50, 3: 50}, **at(3)),
        # 1.5 against 0.9: 0.6 of it
        *_bucket(b, "none", {2: 50, 3: 50}, **at(4)), *_bucket(b, "<50%", {1: 10, 2: 90}, **at(4)),
        # <50% at a third, >=50% under the floor: the last bucket past it is <50%
        *_bucket(b, "none", {2: 50, 3: 50}, **at(5)), *_bucket(b, "<50%", {1: 50, 2: 50}, **at(5)),
        *_bucket(b, ">=50%", {1: 10}, **at(5))]
    test = _gap_test(rule, series, _expect(rule, 0.5 / 1.5, **{b.attribute: ">=50%"},
                                           instance=at(1)["instance"]))
    test["alert_rule_test"][1]["exp_alerts"].append(
        _expect(rule, 0.5 / 1.5, **{b.attribute: "<50%"}, instance=at(5)["instance"]))
    return test


def _long_context_test(rule: dict) -> dict:
    """Each deployment its own instance, request-steps per minute by bucket (the rule
    counts an hour: 5 a minute are 300, 2.5 a minute 150, under the floor of 200)."""
    def at(n: int, copy: bool = False) -> dict:
        return {"instance": f"10.0.0.{n}:9464",
                S.ATTR_COUNTED: S.COUNTED_COPY if copy else S.COUNTED_ONCE}
    drop = [*_context("<512", {1: 4, 3: 6}),        # 1.2 accepted per request-step
            *_context("1k-2k", {2: 5}),             # 1.0: qualifies, not the shortest
            *_context("8k-16k", {1: 3, 2: 2}),      # 0.4: a third of 1.2, 0.8 fewer
            *_context(">=128k", {1: 2}),            # 120 an hour: under the floor
            *_context(CTX.UNKNOWN, {1: 10})]        # no length: never a bucket
    series = _with_copy(drop)  # fires for rank 0 (INSTANCE) alone, not for its copy
    series += [  # below the floor: 150 request-steps at 8k-16k, none accepted
        *_context("<512", {1: 4, 3: 6}, **at(2)), *_context("8k-16k", {1: 2.5}, **at(2)),
        # half, but only 0.25 fewer (0.5 against 0.25)
        *_context("<512", {1: 5, 2: 5}, **at(3)), *_context("4k-8k", {1: 7.5, 2: 2.5}, **at(3)),
        # 0.8 fewer but 0.6 of the short bucket's (2.0 against 1.2)
        *_context("<512", {3: 10}, **at(4)), *_context("8k-16k", {2: 8, 3: 2}, **at(4)),
        # buckets next to each other (<512, 512-1k): one apart
        *_context("<512", {3: 10}, **at(5)), *_context("512-1k", {1: 10}, **at(5)),
        # exactly half and 0.5 fewer: fires (at most RATIO)
        *_context("<512", {2: 10}, **at(6)), *_context("2k-4k", {1: 5, 2: 5}, **at(6)),
        # tensor-parallel copies alone (`counted="copy"`): the figures of a firing rank 0
        *[x for b, c in (("<512", {1: 4, 3: 6}), ("8k-16k", {1: 3, 2: 2}))
          for x in _context(b, c, **at(7, copy=True))]]
    fire = _expect(rule, 0.4 / 1.2, context="8k-16k")
    half = _expect(rule, 0.5, context="2k-4k", instance=at(6)["instance"])
    return {"interval": "1m", "input_series": series, "alert_rule_test": [
        # 30m: the drop's long bucket still under the floor, the half's pending (15m)
        {"eval_time": "30m", "alertname": rule["alert"], "exp_alerts": []},
        {"eval_time": "70m", "alertname": rule["alert"], "exp_alerts": [fire, half]}]}


def _step_costs(accepted_per_minute: float, drafts_per_minute: float = 120) -> list[dict]:
    """A deployment's step costs, a minute at a time: 60 measured steps at batch 1 (12 ms,
    the target's forward over 4 tokens 5.5 ms) and 60 at batch 4 (16.5 ms, forward over 16
    tokens 8.5 ms), 0.5 ms between steps; so the forward's line is 4.5 ms + 0.25 ms a token,
    a plain step 5.75 ms at batch 1 and 6.5 ms at batch 4 (the forwards on the line: scaled
    by 1; docs/advisor.md)."""
    out = [_series(S.SPEC_DRAFTS, f"0+{drafts_per_minute:g}x90"),
           _series(S.SPEC_ACCEPTED_TOKENS, f"0+{accepted_per_minute:g}x90")]
    phases = {"1": dict(step=12, draft=4, verify=6, draft_extend=2, target_forward=5.5),
              "4-7": dict(step=16.5, draft=5, verify=9, draft_extend=2.5, target_forward=8.5)}
    for bucket, (batch, costs) in zip(phases, ((1, phases["1"]), (4, phases["4-7"]))):
        costs = {**costs, "between_steps": 0.5}
        for phase, ms in costs.items():
            at = dict(phase=phase, batch_size_bucket=bucket, num_steps="3")
            out += [_series(S.SPEC_PHASE_TIME, f"0+{60 * ms / 1e3:g}x90", **at),
                    _series(S.SPEC_PHASE_SAMPLES, "0+60x90", **at)]
            if phase == "target_forward":
                x = 4 * batch
                out += [_series(S.SPEC_PHASE_TOKENS, f"0+{60 * x:g}x90", **at),
                        _series(S.SPEC_PHASE_TOKENS_SQUARES, f"0+{60 * x * x:g}x90", **at),
                        _series(S.SPEC_PHASE_TIME_TOKENS, f"0+{60 * x * ms / 1e3:g}x90", **at),
                        _series(S.SPEC_PHASE_REQUESTS, f"0+{60 * batch:g}x90", **at)]
    return out


def _slower_tests(rule: dict) -> list[dict]:
    """The speed-up rule: fires where speculation is slower (accept length 2.0: 2 x 5.75 /
    12.5 = 0.92 at batch 1, 2 x 6.5 / 17 = 0.76 at batch 4, 0.84 together) once it held
    30 minutes; not where it pays (3.5: 1.61 and 1.34), nor under the floor of 100
    request-steps in 30 minutes (3 a minute: 90)."""
    slow = (2 * 5.75 / 12.5 + 2 * 6.5 / 17) / 2
    return [
        {"interval": "1m", "input_series": _step_costs(120), "alert_rule_test": [
            {"eval_time": "20m", "alertname": SLOWER, "exp_alerts": []},  # pending
            {"eval_time": "70m", "alertname": SLOWER, "exp_alerts": [
                {"exp_labels": rule["labels"], "exp_annotations": {
                    k: _render(v, {}, slow) for k, v in rule["annotations"].items()}}]}]},
        {"interval": "1m", "input_series": _step_costs(300), "alert_rule_test": [
            {"eval_time": "70m", "alertname": SLOWER, "exp_alerts": []}]},
        {"interval": "1m", "input_series": _step_costs(3, drafts_per_minute=3),
         "alert_rule_test": [{"eval_time": "70m", "alertname": SLOWER, "exp_alerts": []}]},
    ]


def _drift_test(rule: dict) -> dict:
    """The drift rule: 30 request-steps and 10 finished requests a minute at 1.0 accepted
    each, then none from minute 80 (fires, at 0.00: none accepted in the last 15
    minutes); steady at 1.0 (quiet); the same fall at 10 request-steps a minute (150 in 15
    minutes, under the floor of 200: quiet); a fall from 1.0 to 0.8 (0.8 of it, but 0.2
    fewer: quiet); the fall with 5 requests a minute (75 in 15 minutes, under the floor
    of 100: quiet)."""
    def at(n: int) -> dict:
        return {"instance": f"10.0.2.{n}:9464"}
    series = [*(_series(S.SPEC_REQUESTS, "0+10x120", **at(n)) for n in (1, 2, 3, 4)),
        _series(S.SPEC_REQUESTS, "0+5x120", **at(5)),
        _series(S.SPEC_DRAFTS, "0+30x120", **at(5)),
        _series(S.SPEC_ACCEPTED_TOKENS, "0+30x79 2400x40", **at(5)),
        _series(S.SPEC_DRAFTS, "0+30x120", **at(1)),
        _series(S.SPEC_ACCEPTED_TOKENS, "0+30x79 2400x40", **at(1)),
        _series(S.SPEC_DRAFTS, "0+30x120", **at(2)),
        _series(S.SPEC_ACCEPTED_TOKENS, "0+30x120", **at(2)),
        _series(S.SPEC_DRAFTS, "0+10x120", **at(3)),
        _series(S.SPEC_ACCEPTED_TOKENS, "0+10x79 800x40", **at(3)),
        _series(S.SPEC_DRAFTS, "0+30x120", **at(4)),
        _series(S.SPEC_ACCEPTED_TOKENS, "0+30x79 2400+24x40", **at(4))]
    return {"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "70m", "alertname": rule["alert"], "exp_alerts": []},
        {"eval_time": "110m", "alertname": rule["alert"], "exp_alerts": [
            _expect(rule, 0.0, instance=at(1)["instance"])]}]}


def _replica_test(rule: dict) -> dict:
    """The replica rule: prod's r3 accepts 0.1 draft tokens per request-step, its two
    siblings 1.5 (fires at 0.07 once an hour holds 5000 request-steps each side, quiet
    before); the canary's one process accepts 0.1 too (no siblings: quiet); steady's two
    replicas alike (quiet)."""
    def proc(n: int, service: str, accepted: int) -> list[dict]:
        at = {"instance": f"10.0.3.{n}:9464"}
        info = {**INSTANCE, **at, "service_name": service, "spectrace_draft_model": "/m/v1"}
        return [{"series": "target_info{%s}" % ", ".join(f'{k}="{v}"' for k, v in info.items()),
                 "values": "1x120"}, _series(S.SPEC_DRAFTS, "0+100x120", **at),
                _series(S.SPEC_ACCEPTED_TOKENS, f"0+{accepted}x120", **at)]
    series = [*proc(1, "prod", 150), *proc(2, "prod", 150), *proc(3, "prod", 10),
              *proc(4, "canary", 10), *proc(5, "steady", 150), *proc(6, "steady", 140)]
    return {"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "40m", "alertname": rule["alert"], "exp_alerts": []},
        {"eval_time": "110m", "alertname": rule["alert"], "exp_alerts": [_expect(
            rule, 0.1 / 1.5, instance="10.0.3.3:9464", service_name="prod",
            spectrace_draft_model="/m/v1")]}]}


def rule_tests() -> dict:
    """A broken deployment fires fc bypass, dropped weights and vocabulary-map alerts and
    acceptance collapse, once for a rank 0 and its tensor-parallel copy; a healthy one
    (the same counters at 0) fires nothing; the long-context rule fires on a drop and not
    under the floor, on a small drop, on adjacent buckets or on copies alone."""
    by_name = {r["alert"]: r for r in rules()["groups"][0]["rules"]}
    vocab = S.VOCAB_D2T_ABSOLUTE
    broken = {
        "interval": "1m",
        "input_series": _with_copy([
            _series(S.SPEC_DRAFTS, "0+100x30"), _series(S.SPEC_ACCEPTED_TOKENS, "0+5x30"),
            _series(S.SPEC_ACCEPTED_PER_POSITION, "0+5x30", position="0"),
            _series(S.EAGLE3_FC_BYPASS, "0 40 80"), _series(S.EAGLE3_WIDTH_MISMATCH, "0x30"),
            _series(S.EAGLE3_UNUSED_KEYS, "0 12"), _series(S.EAGLE3_UNLOADED_PARAMS, "0 3"),
            _series(S.FINDINGS, "1x30", code=vocab, severity="error"),
            _series(S.FINDINGS, "0 1x30", code=S.ACCEPTANCE_SYNTHETIC, severity="error"),
            _series(S.FINDINGS, "0 0 2x30", code=S.DRAFT_NON_FINITE, severity="error"),
            _series(S.INTERNAL_ERRORS, "0x30")]),
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": "SpectraceFcBypass",
             "exp_alerts": [_expect(by_name["SpectraceFcBypass"], 80)]},
            {"eval_time": "2m", "alertname": "SpectraceDroppedWeights",
             "exp_alerts": [_expect(by_name["SpectraceDroppedWeights"], 15)]},
            {"eval_time": "2m", "alertname": "SpectraceVocabularyMapError",
             "exp_alerts": [_expect(by_name["SpectraceVocabularyMapError"], 1, code=vocab)]},
            {"eval_time": "0m", "alertname": "SpectraceSyntheticAcceptance", "exp_alerts": []},
            {"eval_time": "2m", "alertname": "SpectraceSyntheticAcceptance",
             "exp_alerts": [_expect(by_name["SpectraceSyntheticAcceptance"], 1)]},
            {"eval_time": "1m", "alertname": "SpectraceDraftNonFinite", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "SpectraceDraftNonFinite",
             "exp_alerts": [_expect(by_name["SpectraceDraftNonFinite"], 2)]},
            {"eval_time": "9m", "alertname": "SpectraceAcceptanceCollapse", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "SpectraceAcceptanceCollapse",
             "exp_alerts": [_expect(by_name["SpectraceAcceptanceCollapse"], 1.05)]},
            {"eval_time": "20m", "alertname": "SpectracePositionZeroCollapse",
             "exp_alerts": [_expect(by_name["SpectracePositionZeroCollapse"], 0.05,
                                    position="0")]},
            {"eval_time": "20m", "alertname": "SpectraceWidthMismatch", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "SpectraceInternalErrors", "exp_alerts": []}],
    }
    healthy = {
        "interval": "1m",
        "input_series": [
            _series(S.SPEC_DRAFTS, "0+100x30"), _series(S.SPEC_ACCEPTED_TOKENS, "0+150x30"),
            _series(S.SPEC_ACCEPTED_PER_POSITION, "0+77x30", position="0"),
            _series(S.EAGLE3_FC_BYPASS, "0x30"), _series(S.EAGLE3_WIDTH_MISMATCH, "0x30"),
            _series(S.EAGLE3_UNUSED_KEYS, "0x30"), _series(S.EAGLE3_UNLOADED_PARAMS, "0x30"),
            _series(S.INTERNAL_ERRORS, "0x30")],
        "alert_rule_test": [{"eval_time": "20m", "alertname": r, "exp_alerts": []}
                            for r in by_name],
    }
    return {"rule_files": ["spectrace-rules.yml"], "evaluation_interval": "1m",
            "tests": [broken, healthy,
                      _long_context_test(by_name["SpectraceLongContextAcceptance"]),
                      _large_batch_test(by_name[BATCH_SIZE.alert]),
                      _label_test(by_name[REQUEST_LABEL.alert]),
                      _prefix_cache_test(by_name[PREFIX_CACHE.alert]),
                      *_slower_tests(by_name[SLOWER]), _drift_test(by_name[DRIFT_ALERT]),
                      _replica_test(by_name[REPLICA.ALERT.name])]}
