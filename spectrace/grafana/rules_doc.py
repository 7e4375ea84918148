"""docs/metrics.md's paragraphs on the report's rules: the breakdowns' (their floors and
the false alarms measured for them, from the rules' own constants) and the sections the
findings' declarations carry (`FindingSpec.doc`: drift, the reference), which
`metrics_doc.render` places."""
from __future__ import annotations

from ..families.breakdowns import BATCH_SIZE, CONTEXT
from ..families.breakdowns import PREFIX_CACHE as PREFIX, REQUEST_LABEL as LABEL
from ..rules import within_request as within


def breakdown_rules() -> list[str]:
    """The breakdowns' rules: what they compare, their floors, their false alarms."""
    return [
        "The sampling and request figures count a request when it finishes (aborted "
        "requests that never reach release are not counted). On the CPU SGLang verifies "
        "every request greedily (`_verify_uses_greedy`), so sampled requests accept as "
        "greedy ones there. `spectrace report` raises `acceptance.long_context` (warning) "
        "when the longest and the shortest context bucket with at least 200 request-steps "
        "each, two buckets apart or more, differ: the long one's accepted tokens per "
        "request-step at most half the short one's and 0.3 fewer; it names what the "
        "draft's config says (`spectrace.eagle3.draft_context`). The Prometheus alert "
        "`SpectraceLongContextAcceptance` (warning) applies the same rule to the last "
        "hour's counts of each counting process (docs/dashboards.md). Likewise "
        "`acceptance.large_batch` and `SpectraceLargeBatchAcceptance` for batch size (the "
        "table above).",
        "",
        "**Drafts cut by the grammar.** Not counted. SGLang 0.5.23 does not report it: "
        "under a grammar its verify masks the target's logits over the draft tree "
        "(`speculative/spec_utils.generate_token_bitmask`), so a draft token the grammar "
        "forbids is simply rejected and counted as any rejection. vLLM reports it only "
        "under async scheduling, per step (`SchedulerOutput.num_invalid_spec_tokens`: "
        "request id -> drafts the grammar cut, left out of `SpecDecodingStats` and of the "
        "per-request `num_draft_tokens`); with synchronous scheduling "
        "`update_draft_token_ids` truncates the drafts without a count, and vLLM's CPU "
        "platform forces async scheduling off (`platforms/cpu.py`), so no CPU server here "
        "can show the count. spectrace does not read it yet. The `grammar` breakdown shows "
        "the effect either way: constrained requests' acceptance beside unconstrained ones'.",
        "",
        f"Request labels: `acceptance.label_gap` (warning) and "
        f"`SpectraceRequestLabelAcceptance` compare the best and the worst label with at "
        f"least {LABEL.rule.floor} request-steps each (labels have no order); the worse at "
        f"most {LABEL.rule.ratio:g}x the better's accepted tokens per request-step and "
        f"{LABEL.rule.drop:g} fewer: traffic the draft was not trained for (a domain, a "
        "LoRA adapter, a tenant). Sampling: `acceptance.sampling_gap` is info, with no "
        "alert: a greedy draft's token is accepted with the target's probability of it, so "
        "sampled requests accept less than greedy ones on a healthy deployment "
        "(vllm#31483: 80 % at temperature 0, 30 % at 1); it only explains a weak mean in "
        "the verdict (docs/report.md). Both split whole requests, whose acceptance varies "
        "far more than a step's, so their floors are higher and their gaps wider than the "
        "step breakdowns'.",
        "",
        f"Prefix cache: `acceptance.prefix_cache_gap` (warning) and `{PREFIX.alert}` compare "
        f"requests with no hit (`none`) with the last hit bucket with at least "
        f"{PREFIX.rule.floor} request-steps, at the label rule's gap: a hit reuses the KV the "
        "request would have computed, so on a correct runtime acceptance does not depend on "
        "it, and a fall in the hits is the stale-KV signature (vllm#41838, vllm#43559); "
        "hits accepting more never fire. Repeated prompts are often traffic of another "
        "kind, so the gap is wide enough for a domain shift, and the message says to rerun "
        "with prefix caching off to tell the two apart. Structured output: "
        "`acceptance.grammar_gap` is info, with no alert (the best and the worst kind): the "
        "draft proposes without the grammar, so constrained requests accept differently by "
        "construction (less where its tokens break the grammar, more where the grammar "
        "forces them); like sampling's it only explains a weak mean.",
        "",
        "Floors and false alarms (`python benchmarks/breakdown_rules.py --runs 100`, "
        "simulated identical runs, every bucket filled with whole requests of 16-256 "
        "steps up to the floor or 4x it, K 3 or 5, per-position acceptance 0.3-0.85, "
        "requests alike or spread as a Beta of concentration 30 or 5, the last as mixed as "
        "code, chat and other languages; `benchmarks/results/breakdown-rules.json`): "
        "request label, 2 or 8 labels: no false alarm in 4,800 runs each; 32 labels: 5 in "
        "1,200, all among the 400 with the most mixed requests, at the floor (3 of 25 in "
        "the worst setting: K 5, per-position acceptance 0.3); "
        "sampling: none in 4,800; prefix cache: none in 4,800, and with the cached "
        "requests another kind of traffic accepting 0.8x as well (code against chat, say) "
        "19 in 4,800, 17 of them among the 800 most mixed at the floor, where a stale KV on "
        "top (0.48x) is found in 75 %; grammar, all six kinds at once: none in 4,800. "
        "With the step breakdowns' 2000, 0.7 and 0.3 the label "
        "rule raised 86 % of 32-label runs of the most mixed requests. A planted fall "
        "(one bucket's requests at 0.6x their acceptance) is found in 65-72 % of runs, "
        "missed where 0.6x is under 0.5 tokens a step. Context and batch size measured "
        "the same way (whole requests in a bucket, the worst case: their buckets split a "
        "request's steps): 0 false alarms with requests alike, 13 and 5 in 1,600 at "
        "concentration 30, 142 and 83 in 1,600 with the most mixed requests (23 and 21 of "
        "100 in their worst setting).",
        "",
        "**Within-request comparison (issue #48; not wired yet).** "
        "`spectrace/rules/within_request.py` compares, over the requests seen in both of "
        f"two buckets of a step breakdown (at least {within.MIN_REQUESTS}, with the "
        "breakdown's floor of request-steps in each: "
        f"{CONTEXT.rule.floor} for context, {BATCH_SIZE.rule.floor} for batch size), each "
        "request's accepted tokens per request-step in the later bucket with its own in the "
        "earlier: observed against expected accepted tokens with each request's own rate as "
        "the expectation (the Mantel-Haenszel-weighted within-request difference, a "
        "stratified test with requests as strata), its variance the larger of the per-step "
        "one (each request's own per-step variance, or its bound r(K - r) where squares are "
        "not counted) and the cluster-robust one over requests (correlated steps within a "
        "request), compared with Student's t at 0.1 % with requests less one degrees of "
        "freedom; it fires at the same size of fall as the breakdown's gap rule "
        f"({CONTEXT.rule.ratio:g}x and {CONTEXT.rule.drop:g} fewer for context, "
        f"{BATCH_SIZE.rule.ratio:g}x and {BATCH_SIZE.rule.drop:g} for batch size), on the "
        "within-request ratio. Measured with `python benchmarks/within_request_rules.py "
        "--runs 400` (`benchmarks/results/within-request-rules.json`, 2 min 36 s on one "
        "core): requests of 16-256 steps split over the two buckets (the later steps in the "
        "second for context), 30 % wholly in one, K 3 or 5, per-position acceptance "
        "0.3-0.85, filled until the requests seen in both reach the floor or 4x it, 400 "
        "runs a setting, 6,400 a traffic. False alarms, today's gap against the "
        "within-request rule: requests alike 0 and 0 for both breakdowns; the most mixed "
        "requests (Beta concentration 5) context 30 (worst setting 11 of 400) against 0, "
        "batch size 40 (19 of 400) against 0; confounded (the requests accepting below the "
        "mean run 80 % of their steps in the long contexts or large batches, no effect "
        "within any request) context 1,901 (274 of 400) against 0, batch size 4,728 (399 "
        "of 400) against 0; requests whose acceptance drifts in stretches of about 16 "
        "steps, independent of the bucket, context 33 and batch size 68 (23 of 400) "
        "against 0 and 0, its significance test alone at most 12 of 3,200 (0.4 %). A "
        "planted fall (every request at 0.6x its per-position acceptance in the second "
        "bucket) is found in 81 % and 83 % of runs (gap: 75 % and 84 %); from a mean "
        "acceptance of 0.5 up: context 82-100 % of runs a setting (the lowest K 3, mean "
        "0.5, at the floor, where 0.6x is near the 0.5x ratio), batch size 99-100 %; at "
        "0.3 the fall is under 0.3 tokens and is not called (the test alone finds it in "
        "77-100 %). Its 95 % interval of the within-request ratio holds 1 in 96-98 % of "
        "runs with no effect, 93-94 % where acceptance drifts within requests (90 % in the "
        "worst setting). The runtime feed, a request id per request-step (SGLang v2's batch "
        "`reqs`, vLLM's scheduler output), is not wired yet, so `spectrace report` and the "
        "alert rules still judge context and batch size with today's gap rule and its "
        "false alarms above.",
        "",
    ]


def declared_sections(specs) -> list[str]:
    """The sections the findings' declarations carry (`FindingSpec.doc_title`, `doc`: the
    drift rule, the reference), in the order given."""
    out: list[str] = []
    for spec in specs:
        if spec.doc_title:
            out += [f"## {spec.doc_title}", ""]
            for paragraph in spec.doc:
                out += [paragraph, ""]
    return out
