"""The overview dashboard: acceptance, agreement, throughput, EAGLE-3 faults, findings.

Thresholds are the healthy ranges in `spectrace.signals` (ACCEPT_LENGTH_*, POSITION0_*):
mean acceptance length red below 1.2, amber 1.2-2.0; position-0 acceptance red below 0.2.
"""
from __future__ import annotations

import math

from .. import signals as S
from ..families.breakdowns import BREAKDOWNS, VLLM_PER_REQUEST

from ..rules import drift as DRIFT
from ..rules import reference as REFERENCE
from ..rules import speculation as SPEED
from . import promql as Q

DS = {"type": "prometheus", "uid": "${datasource}"}
F = Q.DASHBOARD_FILTER
BY = Q.SCRAPE_LABELS
RATE = "$__rate_interval"
RANGE = "$__range"
GRID_WIDTH = 24  # Grafana's dashboard grid columns

ACCEPT_LENGTH_STEPS = [{"color": "red", "value": None},
                       {"color": "orange", "value": S.ACCEPT_LENGTH_RED_BELOW},
                       {"color": "green", "value": S.ACCEPT_LENGTH_AMBER_BELOW}]
POSITION0_STEPS = [{"color": "red", "value": None},
                   {"color": "green", "value": S.POSITION0_RED_BELOW}]
HEALTHY_ACCEPT_LENGTH = (f"red below {S.ACCEPT_LENGTH_RED_BELOW}, amber "
                         f"{S.ACCEPT_LENGTH_RED_BELOW}-{S.ACCEPT_LENGTH_AMBER_BELOW}")
ZERO_IS_GOOD = [{"color": "green", "value": None}, {"color": "red", "value": 1}]
SPEEDUP_STEPS = [{"color": "red", "value": None}, {"color": "orange", "value": 1.0},
                 {"color": "green", "value": 1.1}]
# mean accept length / reference: red at or below 1 - MARGIN (rules.reference), green above
BELOW_REFERENCE_STEPS = [{"color": "red", "value": None},
                         {"color": "green", "value": math.nextafter(1 - REFERENCE.MARGIN, 2)}]


def _target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict:
    t = {"datasource": DS, "expr": expr, "refId": ref, "legendFormat": legend or "__auto"}
    if instant:
        t.update(instant=True, range=False)
    return t


def _panel(kind: str, title: str, desc: str, targets: list[dict], size: tuple, unit="short",
           steps=None, decimals=None, options=None, custom=None) -> dict:
    """A panel `size` = (width, height) grid units; `layout` gives it its place."""
    w, h = size
    defaults: dict = {"unit": unit}
    if steps:
        defaults["thresholds"] = {"mode": "absolute", "steps": steps}
    if decimals is not None:
        defaults["decimals"] = decimals
    if custom:
        defaults["custom"] = custom
    for i, t in enumerate(targets):
        t["refId"] = chr(ord("A") + i)
    return {"type": kind, "title": title, "description": desc, "datasource": DS,
            "gridPos": {"w": w, "h": h}, "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []}, "options": options or {}}


def _stat(title, desc, expr, size, **kw) -> dict:
    opts = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background", "graphMode": "none", "textMode": "value"}
    return _panel("stat", title, desc, [_target(expr, instant=True)], size, options=opts, **kw)


def _series(title, desc, targets, size, steps=None, **kw) -> dict:
    custom = {"drawStyle": "line", "lineWidth": 2, "fillOpacity": 0, "spanNulls": False}
    if steps:
        custom["thresholdsStyle"] = {"mode": "line+area"}
    return _panel("timeseries", title, desc, targets, size, steps=steps or ZERO_IS_GOOD,
                  custom=custom, options={"legend": {"displayMode": "table",
                                                     "placement": "bottom"},
                                          "tooltip": {"mode": "multi"}}, **kw)


def _bars(title, desc, targets, size, **kw) -> dict:
    for t in targets:
        t.update(instant=True, range=False)
    opts = {"orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True,
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    return _panel("bargauge", title, desc, targets, size, options=opts, **kw)


NEEDS_FLOORS = "No bar for a deployment until the range holds"  # ... the floor, in words
NEEDS_HISTORY = ("No data until a process has served 15 minutes past the floors (a new "
                 "or quiet deployment shows none).")
ONCE = ("Each request-step counted once: tensor-parallel copies (counted=\"copy\") "
        "are left out, data-parallel groups add up.")
PER_RANK = ("Per rank: one line per process, tensor-parallel copies included (they repeat "
            "their rank 0's line); not a total.")
PER_PROCESS = "Per process: each rank loads its own draft and raises its own findings."


def rows(flt: str = F) -> list[list[dict]]:
    """The overview's panels row by row, each row left to right (`layout` places them),
    every series matched by `flt`. A new panel is one more entry here, or a new row."""
    pos0 = Q.per_position_acceptance(RANGE, (), flt, f'{S.ATTR_POSITION}="0"')
    return [
        [
            _stat("Mean acceptance length", "Tokens per verify step over the selected range, "
                  "bonus token included (1 + accepted/drafts). 1.0 means speculation gains "
                  "nothing; broken deployments show 1.00-1.12; chain drafting with 3-4 steps "
                  "typically gives 2-3.5. " + ONCE, Q.mean_acceptance_length(RANGE, (), flt),
                  (3, 5), steps=ACCEPT_LENGTH_STEPS, decimals=2),
            _stat("Acceptance rate", "Accepted draft tokens / proposed draft tokens. " + ONCE,
                  Q.acceptance_rate(RANGE, (), flt), (3, 5), unit="percentunit",
                  decimals=1),
            _stat("Position-0 acceptance", "Share of steps whose first draft token was "
                  f"accepted. Below {S.POSITION0_RED_BELOW} points at a broken draft input (fc "
                  "bypass, aux layers, d2t). " + ONCE, pos0, (3, 5), unit="percentunit",
                  steps=POSITION0_STEPS, decimals=1),
            _stat("Accepted tokens / s", "Draft tokens accepted per second (bonus excluded). "
                  + ONCE, Q.srate(S.SPEC_ACCEPTED_TOKENS, RANGE, (), flt), (3, 5),
                  unit="short", decimals=1),
            _stat("Request-steps verified", "Request-steps verified since the processes "
                  "started (one per request per speculative step; restarts start again at 0). "
                  + ONCE, Q.stotal(S.SPEC_DRAFTS, (), flt), (3, 5), unit="short",
                  decimals=0),
            _stat("Accepted draft tokens", "Draft tokens accepted since the processes started "
                  "(bonus excluded). " + ONCE, Q.stotal(S.SPEC_ACCEPTED_TOKENS, (), flt),
                  (3, 5), unit="short", decimals=0),
            _stat("fc bypass passes", "Target-fed draft passes that skipped fc since process "
                  "start; any value above 0 is a misconfiguration. " + ONCE,
                  Q.stotal(S.EAGLE3_FC_BYPASS, (), flt), (3, 5), steps=ZERO_IS_GOOD),
            _stat("Dropped weights", "Checkpoint keys the runtime dropped + draft parameters "
                  "that no key loaded, in the process that dropped most. " + PER_PROCESS,
                  f"max({Q.dropped_weights(BY, flt)})", (3, 5), steps=ZERO_IS_GOOD),
        ],
        [
            _series("Mean acceptance length over time", "1 + rate(accepted)/rate(drafts) per "
                    f"endpoint; {HEALTHY_ACCEPT_LENGTH}. " + PER_RANK,
                    [_target(Q.mean_acceptance_length(RATE, BY, flt, copies=True), "{{instance}}")],
                    (12, 8), steps=ACCEPT_LENGTH_STEPS, decimals=2),
            _series("Per-position acceptance", "rate(accepted per position)/rate(drafts): "
                    "healthy chains decay, e.g. 0.77/0.55/0.38/0.29. " + PER_RANK,
                    [_target(Q.per_position_acceptance(RATE, BY, flt, copies=True),
                             "{{instance}} pos {{position}}")], (12, 8),
                    unit="percentunit"),
        ],
        [
            _series("Acceptance drift: last 15 minutes against the 6 hours before",
                    "Accepted draft tokens per request-step over the last 15 minutes divided "
                    "by those over the 6 hours before them, per endpoint, where both windows "
                    f"hold at least {DRIFT.FLOOR} request-steps; the alert "
                    f"SpectraceAcceptanceDrift fires at {DRIFT.RATIO:g} or below with "
                    f"{DRIFT.DROP:g} tokens fewer. A fall is the traffic or the system: "
                    "`spectrace report` says which breakdown's mix moved (finding "
                    f"{S.ACCEPTANCE_DRIFT}). " + NEEDS_HISTORY + " " + ONCE,
                    [_target(Q.drift_ratio("15m", "6h", BY, flt), "{{instance}}")],
                    (24, 6), steps=[{"color": "red", "value": None},
                                    {"color": "green", "value": DRIFT.RATIO}], decimals=2),
        ],
        [
            _bars("Accept-length distribution", "Share of request-steps by accept length over "
                  "the selected range (1 = only the bonus token). " + ONCE,
                  [_target(Q.accept_length_share(RANGE, (), flt), "length {{length}}")],
                  (8, 8), unit="percentunit", steps=[{"color": "blue", "value": None}]),
            _series("Draft/target agreement per position", "Compared steps where the draft "
                    "token equals the target's own prediction at that position (sampled). "
                    + PER_RANK,
                    [_target(Q.agreement_per_position(RATE, BY, flt, copies=True),
                             "{{instance}} pos {{position}}")], (8, 8),
                    unit="percentunit"),
            _series("Tokens per second", "Accepted draft tokens/s, and target tokens/s through "
                    "speculative steps (accepted + bonus), and the request-steps/s that ran "
                    "with no draft token (adaptive speculation's K = 0: one token each, kept "
                    "out of every acceptance figure). " + PER_RANK,
                    [_target(Q.srate(S.SPEC_ACCEPTED_TOKENS, RATE, BY, flt, copies=True),
                             "{{instance}} accepted"),
                     _target(Q.target_tokens_per_second(RATE, BY, flt, copies=True),
                             "{{instance}} emitted"),
                     _target(Q.srate(S.SPEC_NO_DRAFT_STEPS, RATE, BY, flt, copies=True),
                             "{{instance}} steps with no draft")],
                    (8, 8), steps=[{"color": "green", "value": None}]),
        ],
        [
            _series("fc-bypass and width-mismatch events", "Target-fed draft passes whose "
                    "input width shows the draft did not get the concatenated aux layers. "
                    + PER_RANK,
                    [_target(Q.srate(S.EAGLE3_FC_BYPASS, RATE, BY, flt, fn="increase",
                                     copies=True), "{{instance}} fc bypass"),
                     _target(Q.srate(S.EAGLE3_WIDTH_MISMATCH, RATE, BY, flt, fn="increase",
                                     copies=True), "{{instance}} width mismatch")],
                    (12, 8)),
            _bars("Draft input widths", "Draft passes by kind and hidden-state width (per s), "
                  "next to the widths the draft expects (fc_in = 3 x target hidden). " + ONCE,
                  [_target(Q.srate(S.EAGLE3_PASSES, RANGE, (S.ATTR_PASS_KIND, S.ATTR_WIDTH), flt),
                           "{{pass_kind}} width {{width}}"),
                   _target(f"max by (kind) ({Q.sel(S.EAGLE3_EXPECTED_WIDTH, flt)})",
                           "expected {{kind}}")], (12, 8),
                  steps=[{"color": "blue", "value": None}]),
        ],
        [
            _bars("Findings by code (weights, vocabulary map, fc bypass, aux)", "Findings "
                  "raised since process start, by code and severity, in the process that "
                  "raised most; docs/doctor.md explains each code. " + PER_PROCESS,
                  [_target(f"max by ({S.ATTR_CODE}, {S.ATTR_SEVERITY}) "
                           f"({Q.stotal(S.FINDINGS, BY + (S.ATTR_CODE, S.ATTR_SEVERITY), flt)})",
                           "{{code}} ({{severity}})")], (8, 8),
                  steps=ZERO_IS_GOOD),
            _bars("Dropped weights by endpoint", "Unused checkpoint keys and unloaded draft "
                  "parameters since process start. " + PER_PROCESS,
                  [_target(Q.stotal(S.EAGLE3_UNUSED_KEYS, BY, flt), "{{instance}} unused keys"),
                   _target(Q.stotal(S.EAGLE3_UNLOADED_PARAMS, BY, flt),
                           "{{instance}} unloaded params")], (8, 8), steps=ZERO_IS_GOOD),
            _bars("spectrace internal errors", "Exceptions caught inside spectrace hooks since "
                  "process start (the runtime ran normally); report them with the log line. "
                  "Per process.",
                  [_target(Q.stotal(S.INTERNAL_ERRORS, BY + (S.ATTR_HOOK,), flt),
                           "{{instance}} {{hook}}")], (8, 8), steps=ZERO_IS_GOOD),
        ],
        side_by_side_row(flt),
        *fleet_rows(flt),
        *breakdown_rows(flt),
        [
            _stat("Estimated speed-up vs no speculation", "Mean accept length x a plain "
                  "decode step's estimated cost / (whole step + between-steps time), each "
                  "batch-size bucket weighted by its measured steps (SPECTRACE_STEP_COST_EVERY). "
                  "The plain step is the target's forward fitted against its tokens at the "
                  "bucket's mean batch, plus the step's other work; without a fit (one batch "
                  "size and one K, or no target_forward: MRV2 before vLLM 0.28) it is bounded by the verify "
                  "phase and the figure is an upper bound. Below 1.0 speculation is slower; "
                  "`spectrace report` gives the interval, the best number of draft tokens per "
                  "batch size and the runtime's setting for it (docs/advisor.md). vLLM: the "
                  "accept length from the EngineCore, the step costs from the worker (the V1 "
                  "runner and MRV2). " + ONCE,
                  Q.estimated_speedup(RANGE, flt),
                  (6, 8), decimals=2, steps=SPEEDUP_STEPS),
            _bars("Estimated speed-up by batch size", "The estimate above for each batch-size "
                  "bucket (the requests verified in a step): speculation loses from the "
                  "first bucket below 1.0 (red) on; it usually pays at small batches and "
                  "loses at large ones, where verifying K + 1 tokens per request costs more "
                  "than the drafts save. The best number of draft tokens per bucket and the "
                  "runtime's per-batch-size setting (SGLang --speculative-adaptive-config, "
                  "vLLM num_speculative_tokens_per_batch_size): `spectrace report`. " + ONCE,
                  [_target(Q.speedup_by_batch(RANGE, flt), "batch {{batch_size_bucket}}")],
                  (6, 8), decimals=2, steps=SPEEDUP_STEPS),
            _series("Step cost per phase and batch size", "Mean measured time of the whole "
                    "step, its draft, verify and draft-extend phases, the target's forward "
                    "inside verify (target_forward), and the time outside the worker between "
                    "steps, by batch-size bucket (wall time on the CPU, CUDA events on a GPU). "
                    "vLLM (the worker): verify is execute_model, target_forward its "
                    "_model_forward (V1 runner) or from vLLM's forward-start mark to "
                    "execute_model's end (MRV2, 0.28+), draft propose_draft_token_ids (V1 runner) or "
                    "the speculator's propose (MRV2), no draft-extend (inside draft). "
                    "The short prefill forwards of the cost model's fit (K = 0) are left "
                    "out. " + ONCE,
                    [_target(Q.phase_seconds(RATE, (), flt, Q.IN_STEPS),
                             "{{phase}} batch {{batch_size_bucket}}")], (12, 8), unit="s"),
        ],
        [
            _bars("Requests by mean accept length", "Finished requests over the selected "
                  "range by their own mean accept length (bonus included, quarter-token "
                  "buckets): a minority of requests near 1.0 that drags the mean down shows "
                  "here; `spectrace report` lists sampled requests with the runtime's request "
                  "id. " + ONCE + " " + VLLM_PER_REQUEST,
                  [_target(Q.requests_by_mean_accept_length(RANGE, (), flt),
                           "{{mean_accept_length}}")], (12, 8),
                  steps=[{"color": "blue", "value": None}]),
            _bars("Requests by acceptance rate (cumulative)", "Finished requests over the "
                  "selected range whose own acceptance rate (accepted / proposed draft tokens) "
                  "is at most each edge (the histogram spectrace.spec.request_acceptance; "
                  "histogram_quantile() reads it too). A step between 0.96 and 1 is requests "
                  "accepting almost everything (a loop, or a KV race); one at the low edges "
                  "while the rest sit high is garbled output. `spectrace report` names such "
                  "requests (requests.low_acceptance, requests.implausible_acceptance). "
                  + ONCE + " " + VLLM_PER_REQUEST,
                  [_target(Q.requests_by_acceptance_rate(RANGE, (), flt), "<= {{le}}")],
                  (12, 8), steps=[{"color": "blue", "value": None}]),
        ],
        [
            _bars("Accept-length distribution by sampling", "Share of each sampling bucket's "
                  "request-steps (greedy, t<0.5, 0.5<=t<1, t>=1; finished requests) by accept "
                  "length: drafts propose greedily, so sampled requests usually accept less "
                  "and a mixed workload averages the two. " + ONCE + " " + VLLM_PER_REQUEST,
                  [_target(Q.accept_length_share_by_sampling(RANGE, (), flt),
                           "{{sampling}} length {{length}}")], (12, 8),
                  unit="percentunit", steps=[{"color": "blue", "value": None}]),
        ],
    ]


SIDE_BY_SIDE = ("One bar per deployment (service_name: OTEL_SERVICE_NAME) and draft (its "
                "path and content hash, from target_info), for an A/B of two drafts or two "
                "configurations served side by side (give each its own OTEL_SERVICE_NAME); "
                "the Deployment and Draft variables choose which. Each process's counts are "
                "labelled from its target_info, then added up (replicas of one deployment "
                "add).")
SIDE_BY_SIDE_LEGEND = "{{%s}} {{%s}} {{%s}}" % Q.SIDE_BY_SIDE


FLEET_WORST = 10  # instances the fleet's worst-instances panel lists


def fleet_rows(flt: str = F) -> list[list[dict]]:
    """A fleet, where per-instance panels would be hundreds of lines: one bar per
    deployment and draft (its estimated speed-up, its acceptance against its reference,
    its drift, the findings it raised), and the worst instances (`spectrace report
    --prometheus` judges each deployment; docs/report.md)."""
    fleet = "{{%s}} {{%s}}" % Q.FLEET
    return [[
        _bars(f"Worst {FLEET_WORST} instances by mean acceptance length", "The processes "
              "with the lowest 1 + accepted/request-steps over the selected range, each "
              "with its deployment (service_name) and draft from target_info: one bad "
              f"replica in a fleet. {HEALTHY_ACCEPT_LENGTH}. " + ONCE,
              [_target(Q.worst_instances(RANGE, FLEET_WORST, flt),
                       "{{%s}} {{%s}} {{instance}}" % (Q.DEPLOYMENT, Q.DRAFT))], (8, 8),
              steps=ACCEPT_LENGTH_STEPS, decimals=2),
        _bars("Estimated speed-up by deployment and draft", "The estimated speed-up "
              "against no speculation (as 'Estimated speed-up vs no speculation' further "
              "down: mean accept length x a plain step's estimated cost / (step + between "
              "steps), each batch-size bucket weighted by its measured steps) for each "
              "deployment (service_name) and "
              "draft: its processes' counts and step costs added up, the target's forward "
              "fitted over its own forwards; `spectrace report --prometheus` gives the "
              "same figure for each deployment. " + NEEDS_FLOORS + " the advisor's floor "
              f"({SPEED.MIN_STEPS} measured steps and {SPEED.MIN_DRAFTS} request-steps in "
              "the range). Below 1.0 (red) speculation is slower. " + ONCE,
              [_target(f"{Q.estimated_speedup(RANGE, flt, Q.FLEET)} and on("
                       f"{', '.join(Q.FLEET)}) {Q.speedup_floor(RANGE, flt, Q.FLEET)}",
                       fleet)], (8, 8), decimals=2, steps=SPEEDUP_STEPS),
        _bars("Acceptance against its reference by deployment and draft", "The mean "
              "accept length (1 + accepted/request-steps over the selected range) of each "
              "deployment (service_name) and draft, its processes' counts added up, "
              "divided by the reference its operator set (SPECTRACE_EXPECTED_ACCEPT_LENGTH "
              f"on the server, exported as {S.SPEC_REFERENCE_ACCEPT_LENGTH.prometheus_name}; "
              f"the highest of its processes'). At or below {1 - REFERENCE.MARGIN:.0%} "
              f"(red) `spectrace report` raises {S.BELOW_REFERENCE} where the mean is also "
              f"{REFERENCE.SIGMAS:g} standard errors below the reference. A deployment "
              "without the setting has no bar. " + NEEDS_FLOORS
              + f" the rule's floor ({REFERENCE.FLOOR} request-steps in the range). " + ONCE,
              [_target(Q.reference_ratio(RANGE, Q.FLEET, flt), fleet)], (8, 8),
              unit="percentunit", decimals=1, steps=BELOW_REFERENCE_STEPS),
    ], [
        _bars("Acceptance drift by deployment and draft", "Accepted draft tokens per "
              "request-step over the last 15 minutes divided by those over the 6 hours "
              "before them, for each deployment (service_name) and draft: its processes' "
              "counts added up, where both windows hold the drift rule's floors "
              f"({DRIFT.FLOOR} request-steps); a deployment at {DRIFT.RATIO:g} or below "
              "drifted (red). Per process: the drift panel above, and SpectraceAcceptanceDrift. "
              + NEEDS_HISTORY + " " + ONCE,
              [_target(Q.drift_ratio("15m", "6h", Q.FLEET, flt, labelled=True), fleet)],
              (12, 8), steps=[{"color": "red", "value": None},
                              {"color": "green", "value": DRIFT.RATIO}], decimals=2),
        _bars("Findings by deployment and draft", "Findings raised since process start, "
              "by deployment (service_name), draft, code and severity, added up over each "
              "deployment's processes (every process raises its own; a healthy fleet shows "
              "0 for every code); docs/doctor.md explains each code. " + PER_PROCESS,
              [_target(Q.findings_side_by_side(flt=flt),
                       fleet + " {{code}} ({{severity}})")],
              (12, 8), steps=ZERO_IS_GOOD),
    ]]


def side_by_side_row(flt: str = F) -> list[dict]:
    """The A/B comparison: deployments and drafts side by side over the selected range."""
    return [
        _bars("Mean acceptance length by deployment and draft", "1 + accepted/request-steps "
              f"over the selected range. {SIDE_BY_SIDE} {HEALTHY_ACCEPT_LENGTH}. " + ONCE,
              [_target(Q.mean_acceptance_length_side_by_side(RANGE, flt=flt),
                       SIDE_BY_SIDE_LEGEND)], (12, 8), steps=ACCEPT_LENGTH_STEPS, decimals=2),
        _bars("Per-position acceptance by deployment and draft", "rate(accepted per "
              f"position)/rate(request-steps) over the selected range. {SIDE_BY_SIDE} " + ONCE,
              [_target(Q.per_position_acceptance_side_by_side(RANGE, flt=flt),
                       SIDE_BY_SIDE_LEGEND + " pos {{position}}")], (12, 8),
              unit="percentunit", steps=[{"color": "blue", "value": None}]),
    ]


def breakdown_rows(flt: str = F) -> list[list[dict]]:
    """Mean acceptance length by each declared breakdown (`families.breakdowns`), two to a
    row."""
    panels = []
    for b in BREAKDOWNS:
        reading = f"; {b.reading}" if b.reading else ""
        panels.append(_bars(
            f"Mean acceptance length by {b.title}",
            f"1 + accepted/request-steps over the selected range, by {b.title}: {b.value}"
            f"{reading}. {HEALTHY_ACCEPT_LENGTH}. " + ONCE + (f" {b.where}" if b.where else ""),
            [_target(Q.mean_acceptance_length_by(b, RANGE, (), flt), "{{" + b.attribute + "}}")],
            (12, 8), steps=ACCEPT_LENGTH_STEPS, decimals=2))
    return [panels[i:i + 2] for i in range(0, len(panels), 2)]


def layout(rows: list[list[dict]]) -> list[dict]:
    """Place the panels: each row below the tallest panel of the row before, left to
    right in it; ids in that order."""
    out, y = [], 0
    for row in rows:
        x = 0
        for p in row:
            w, h = p["gridPos"]["w"], p["gridPos"]["h"]
            if x + w > GRID_WIDTH:
                raise ValueError(f"overview row at y={y}: {p['title']!r} ends at column "
                                 f"{x + w}, past the grid's {GRID_WIDTH}")
            p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
            p["id"] = len(out) + 1
            out.append(p)
            x += w
        y += max(p["gridPos"]["h"] for p in row)
    return out


def panels(flt: str = F) -> list[dict]:
    return layout(rows(flt))


def _query_var(name: str, label: str, query: str, all_value: str | None = ".*") -> dict:
    v = {"type": "query", "name": name, "label": label, "datasource": DS,
         "query": {"query": query, "refId": f"{name}-values"},
         "refresh": 2, "includeAll": True, "multi": True, "sort": 1,
         "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}
    if all_value is not None:
        v["allValue"] = all_value
    return v


def templating(matchers: str = "", datasource: tuple[str, str] | None = None) -> list[dict]:
    """Resource attributes live on `target_info`: deployment (service name), runtime
    (sglang, vllm), model (the served model name), draft (its path) and rank narrow the
    instance list, and every panel filters on job and instance. A process without a draft
    (NGRAM) has no draft label: "All" drafts (`.*`) keeps it. A vLLM EngineCore has no TP
    rank: "All" ranks (`.*`) keeps it, a chosen rank leaves only the workers. `matchers` narrow every list to a deployment; `datasource`
    (name, uid) is the one selected at first (else Grafana's default datasource)."""
    info = "target_info{" + Q.matchers('spectrace_version!=""', matchers)
    runtime = f'{S.RES_RUNTIME.replace(".", "_")}=~"$runtime"'
    chosen = f'{Q.DEPLOYMENT}=~"$deployment", {Q.DRAFT}=~"$draft"'
    ds = {"type": "datasource", "name": "datasource", "label": "Data source",
          "query": "prometheus", "hide": 0}
    if datasource:
        ds["current"] = {"selected": True, "text": datasource[0], "value": datasource[1]}
    return [
        ds,
        _query_var("job", "Job", f"label_values({info}}}, job)"),
        _query_var("deployment", "Deployment",
                   f'label_values({info}, job=~"$job"}}, {Q.DEPLOYMENT})'),
        _query_var("runtime", "Runtime",
                   f'label_values({info}, job=~"$job"}}, {S.RES_RUNTIME.replace(".", "_")})'),
        _query_var("model", "Model",
                   f'label_values({info}, job=~"$job", {runtime}}}, spectrace_model)'),
        _query_var("draft", "Draft",
                   f'label_values({info}, job=~"$job", {Q.DEPLOYMENT}=~"$deployment", '
                   f'{runtime}, spectrace_model=~"$model"}}, {Q.DRAFT})'),
        _query_var("tp_rank", "TP rank",
                   f'label_values({info}, job=~"$job", {runtime}, spectrace_model=~"$model"}}, '
                   "spectrace_tp_rank)"),
        # No allValue: "All" expands to the instances the other filters left.
        _query_var("instance", "Instance",
                   f'label_values({info}, job=~"$job", {chosen}, {runtime}, '
                   'spectrace_model=~"$model", spectrace_tp_rank=~"$tp_rank"}, instance)',
                   all_value=None),
    ]


def dashboard(matchers: str = "", datasource: tuple[str, str] | None = None) -> dict:
    """The overview; `matchers`: label matchers every query also applies (a deployment's
    job, namespace, ...); `datasource`: the Prometheus datasource selected at first."""
    return {
        "uid": "spectrace-overview", "title": "spectrace: EAGLE-3 speculative decoding",
        "description": "Acceptance, draft/target agreement and EAGLE-3 faults reported by "
                       "spectrace (written by `spectrace grafana`).",
        "tags": ["spectrace", "sglang", "vllm", "speculative-decoding"], "editable": True,
        "schemaVersion": 39, "version": 1, "refresh": "30s", "timezone": "",
        "time": {"from": "now-1h", "to": "now"}, "graphTooltip": 1,
        "templating": {"list": templating(matchers, datasource)},
        "annotations": {"list": []}, "panels": panels(Q.matchers(F, matchers)), "links": [],
    }
