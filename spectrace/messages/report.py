"""The words of the findings `spectrace report` judges from the totals (their declarations:
`report.judgement.RULES`): context length, drift, the breakdowns' gaps, the reference,
requests far outside the rest, is speculation paying off."""
from __future__ import annotations

from .. import names
from .message import Message


# -- acceptance by context length (rules.context; judged by `spectrace report`) -------------
LONG_CONTEXT = Message(
    names.LONG_CONTEXT,
    "acceptance falls with context length: mean accept length {long_length} in contexts "
    "of {long} tokens ({long_drafts} request-steps) against {short_length} at {short} "
    "({short_drafts} request-steps). The wiring is not at fault: the draft proposes worse "
    "the longer the context. {trained}",
    "train or fine-tune the draft on sequences as long as the ones served (SpecForge: a "
    "longer max_length), or serve long requests without speculation, or with fewer steps.")
# -- drift over time (rules.drift) --------------------------------------------------------
ACCEPTANCE_DRIFT_SYSTEM = Message(
    names.ACCEPTANCE_DRIFT,
    "acceptance drifted down: mean accept length {recent_length} in the last {window} "
    "({recent_drafts} request-steps) against {earlier_length} before it ({earlier_drafts} "
    "request-steps), and {within}: the system changed, not the traffic mix.",
    "look at what changed when it fell (a restart with other settings, a cache filling up "
    "such as hierarchical KV caching, a new draft or target revision) and compare a run "
    "before and after it with `spectrace report --baseline`.")
ACCEPTANCE_DRIFT_TRAFFIC = Message(
    names.ACCEPTANCE_DRIFT,
    "acceptance drifted down with the traffic: mean accept length {recent_length} in the "
    "last {window} ({recent_drafts} request-steps) against {earlier_length} before it "
    "({earlier_drafts} request-steps), and the traffic moved by {breakdown}: {bucket} "
    "went from {share_before} to {share_now} of the request-steps; {within}. The mix "
    "explains the fall, not the system.")
DRIFT_WITHIN_HELD = ("within the buckets both windows share acceptance held ({within} "
                     "against {expected} at the same mix)")
DRIFT_WITHIN_UNKNOWN = ("most recent request-steps are in buckets the earlier windows had "
                        "too few of to compare")
DRIFT_FELL_WITHIN = "it fell within the buckets of {breakdowns} too"
DRIFT_NO_BREAKDOWN = "no breakdown's mix moved enough to explain it"
BELOW_REFERENCE = Message(
    names.BELOW_REFERENCE,
    "acceptance below the draft's reference: mean accept length {length} over {drafts} "
    "request-steps, {share} of the {reference} expected from {source}.",
    "if the reference is right for this traffic, look for what the serving changed: run "
    "`spectrace doctor` on the draft (dropped weights, aux layer ids, d2t), compare the "
    "server's settings with the evaluation's (draft steps, sampling, chat template), and "
    "check the traffic's context lengths and sampling in the report's breakdowns.")
LARGE_BATCH = Message(
    names.LARGE_BATCH,
    "acceptance falls at large batches: mean accept length {worse_length} at batch size "
    "{worse} ({worse_drafts} request-steps) against {better_length} at {better} "
    "({better_drafts} request-steps). A draft proposes the same tokens whatever the batch, "
    "so the runtime's path for large batches is the suspect: padded CUDA-graph batches or a "
    "batch-size-dependent kernel (as in TensorRT-LLM#7363, vllm-ascend#9290). The buckets "
    "hold different requests' steps, so requests that accept less and run at other batch "
    "sizes (longer ones left as a batch drains, traffic of another kind at another load) "
    "make the same gap.",
    "compare a run with CUDA graphs off (SGLang --disable-cuda-graph, vLLM --enforce-eager) "
    "or with a smaller graph batch limit (SGLang --cuda-graph-max-bs); if acceptance "
    "recovers, report it to the runtime with these figures; if not, compare the requests "
    "the large and the small batches served (the breakdowns by request label, sampling and "
    "prefix cache).")
SAMPLING_GAP = Message(
    names.SAMPLING_GAP,
    "sampled requests accept less than greedy ones: mean accept length {worse_length} at "
    "{worse} ({worse_drafts} request-steps) against {better_length} at {better} "
    "({better_drafts} request-steps). Expected: a greedy draft's token is accepted with the "
    "target's probability of it, which falls as the temperature rises; a mean over both "
    "mixes the two.",
    "judge the draft on its greedy requests' acceptance; if sampled traffic matters, draft "
    "with probabilities (vLLM's draft probs) or fewer steps for it.")
LABEL_GAP = Message(
    names.LABEL_GAP,
    "acceptance differs by request label: mean accept length {worse_length} for label "
    "{worse} ({worse_drafts} request-steps) against {better_length} for {better} "
    "({better_drafts} request-steps). The draft proposes worse for that label's traffic: a "
    "domain, language, LoRA adapter or tenant it was not trained on (speculators#610, "
    "sglang#34337).",
    "train or fine-tune the draft on that label's traffic (or a draft per adapter), or "
    "serve it without speculation; read a few of its requests (their ids are in the "
    "request spans).")
PREFIX_CACHE_GAP = Message(
    names.PREFIX_CACHE_GAP,
    "requests served from the prefix cache accept less than uncached ones: mean accept "
    "length {worse_length} with {worse} of the prompt cached ({worse_drafts} request-steps) "
    "against {better_length} with {better} ({better_drafts} request-steps). A prefix hit "
    "reuses the KV the request would have computed, so on a correct runtime acceptance does "
    "not depend on it: the draft likely reads stale or missing KV for cached prefixes "
    "(vllm#41838, vllm#43559). Repeated prompts can also be traffic of another kind.",
    "rerun the same traffic with prefix caching off (SGLang --disable-radix-cache, vLLM "
    "--no-enable-prefix-caching): if the cached requests' acceptance recovers, it is the "
    "runtime's prefix caching with speculation (check the known issues, report it with "
    "these figures); if not, compare the cached requests' content with the others'.")
GRAMMAR_GAP = Message(
    names.GRAMMAR_GAP,
    "acceptance differs by structured output: mean accept length {worse_length} for "
    "{worse} requests ({worse_drafts} request-steps) against {better_length} for {better} "
    "({better_drafts} request-steps). Expected to a degree: the draft proposes without the "
    "grammar, so tokens it breaks are rejected and tokens it forces are easy; a mean over "
    "both mixes the two.",
    "judge the draft on its unconstrained requests' acceptance; if constrained traffic "
    "matters, train the draft on such outputs or serve it with fewer steps; acceptance "
    "near zero under a grammar is a runtime bug (sglang#9187, vllm#51660).")
TRAINED_KNOWN = "The draft's config says: {settings}."
TRAINED_UNKNOWN = "The draft's config names no trained length."

# -- requests far outside the deployment's acceptance (rules.outliers; `spectrace report`) --
REQUEST_LOW = Message(
    names.REQUEST_LOW,
    "{n} request{s} accepted far less than the deployment: {requests} (acceptance rate "
    "against the median {median} of {reference} recorded requests). A draft rarely fails "
    "on one request alone: its output is likely garbled (a corrupted KV cache or sampling "
    "state), or it is traffic the draft was never trained on.",
    "read those requests' outputs (the ids are the runtime's own); garbled text is a "
    "runtime bug to report with these ids, clean text in another language or domain a "
    "case for the draft's training data.")
REQUEST_IMPLAUSIBLE = Message(
    names.REQUEST_IMPLAUSIBLE,
    "{n} request{s} accepted almost every draft token: {requests} (against the median "
    "{median} of {reference} recorded requests). Above 0.96 a draft agrees with the target "
    "only when the output repeats itself (a generation loop), copies its prompt, or both "
    "read the same wrong KV cache (the KV-race signature, sglang#28771).",
    "read those requests' outputs: a loop or garbage is a bug to report with these ids "
    "(with a hierarchical or remote KV cache, try without it); a faithful copy of the "
    "prompt is a request that really was that easy.")


# -- is speculation paying off (spectrace.report.advisor; `spectrace report`) ---------------------------
SPEC_SLOWER = Message(
    names.SPEC_SLOWER,
    "speculation costs more than it saves at {batch} and K={k}, {how}: estimated speed-up "
    "{speedup}x ({lower}x - {upper}x, {estimate}; {steps} measured steps, {drafts} "
    "request-steps). Each step costs {step_ms} ms for {tokens} tokens per "
    "request, a plain decode step about {plain_ms} ms for one; the advisor's K: {best} "
    "(0: no speculation).",
    "{advice}")
SPEC_SMALL_GAIN = Message(
    names.SPEC_SMALL_GAIN,
    "speculation saves little at {batch} and K={k}, {how}: estimated speed-up {speedup}x "
    "({lower}x - {upper}x, {estimate}; {steps} measured steps, {drafts} request-steps).",
    "{advice}")
SPEC_FEWER_STEPS = Message(
    names.SPEC_FEWER_STEPS,
    "{best} draft steps instead of {current} would give {gain}x the tokens per second "
    "(predicted from the per-position acceptance and step costs measured here).",
    "serve with {flags}.")
ESTIMATE_FIT = ("two standard errors; a plain step from the target's forward fitted against "
                "its tokens")
ESTIMATE_BOUND = ("an upper bound: no fit of the forward's cost (one batch size and K only, or "
                  "no forward measured), so a plain step is bounded by the verify phase")
ADVICE_BEST = "serve with {flags} (predicted {gain}x the current tokens per second)."
ADVICE_OFF = "serve {without} (predicted {gain}x the current tokens per second)."
ADVICE_OFF_COUNTED = ("serve {without} until the draft accepts tokens: with none accepted, "
                      "plain decoding is faster whatever the step costs.")
KNOWN_FROM_COUNTS = ("known from the counts: no draft token accepted in {drafts} "
                     "request-steps, so each step makes one token for a target forward and "
                     "the drafting")
ADVICE_BY_BATCH = ("serve each batch size with its best K, speculation off from batch {loses}: "
                   "{flags}.")
ADVICE_NONE = ("no setting up to the configured {current} draft steps does better; check "
               "acceptance per position (the draft) and the verify cost at this batch size.")
