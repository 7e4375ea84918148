"""The draft's passes and widths: how many draft passes received hidden states of each width
(by pass kind), the widths the draft expects, fc-bypass and width-mismatch passes, the
checkpoint keys a load dropped and the parameters none filled, the draft's top-k and what
its config says about its context. What a width means is `rules.widths`'; the
adapters' draft hooks (`adapters.draft_checks`) report here."""
from __future__ import annotations

from opentelemetry.metrics import Observation

from .. import names
from ..names import COUNTER, GAUGE, MetricSpec
from .instruments import counter, observe

EAGLE3_PASSES = MetricSpec(
    "spectrace.eagle3.hidden_state_passes", COUNTER, "{pass}",
    "Draft passes whose incoming hidden states spectrace saw, by pass kind and width "
    "(SGLang: every pass run in Python; vLLM: the target-fed ones, at "
    "combine_hidden_states).",
    (names.ATTR_PASS_KIND, names.ATTR_WIDTH), counted_once=True)
EAGLE3_EXPECTED_WIDTH = MetricSpec(
    "spectrace.eagle3.expected_width", GAUGE, "1",
    "Widths the draft expects: `fc_in` (fc.in_features), `draft_hidden`, `target_hidden`, "
    "and `num_aux` layers, in the attribute `kind`.", (names.ATTR_KIND,))
EAGLE3_FC_BYPASS = MetricSpec(
    names.METRIC_FC_BYPASS, COUNTER, "{pass}",
    "Target-fed draft passes whose input width equals the draft hidden size: fc was "
    "skipped and the draft saw one layer instead of the concatenated aux layers.",
    counted_once=True)
EAGLE3_WIDTH_MISMATCH = MetricSpec(
    names.METRIC_WIDTH_MISMATCH, COUNTER, "{pass}",
    "Target-fed draft passes whose input width matches neither fc's input nor the draft "
    "hidden size (e.g. 2 of 3 aux layers).", counted_once=True)
EAGLE3_UNUSED_KEYS = MetricSpec(
    names.METRIC_UNUSED_KEYS, COUNTER, "{key}",
    "Draft checkpoint keys that the runtime's load_weights dropped (matched no parameter).")
EAGLE3_UNLOADED_PARAMS = MetricSpec(
    names.METRIC_UNLOADED_PARAMS, COUNTER, "{parameter}",
    "Draft parameters that no checkpoint key loaded (and that the runtime does not share "
    "from the target).")
EAGLE3_DRAFT_CONTEXT = MetricSpec(
    "spectrace.eagle3.draft_context", GAUGE, "1",
    "What the draft's config says about its context, in `kind`: max_position_embeddings, "
    "sliding_window, rope_scaling_factor, original_max_position_embeddings.",
    (names.ATTR_KIND,))
METRICS = (EAGLE3_PASSES, EAGLE3_EXPECTED_WIDTH, EAGLE3_FC_BYPASS, EAGLE3_WIDTH_MISMATCH,
           EAGLE3_UNUSED_KEYS, EAGLE3_UNLOADED_PARAMS, EAGLE3_DRAFT_CONTEXT)



class DraftPasses:
    """The draft's passes in one process. `count` is the hot path (a dict update); a width
    finding (`findings.add`) also counts its pass in the fc-bypass or width-mismatch
    metric."""

    def __init__(self, findings) -> None:
        self.findings = findings
        self.counts: dict[tuple[str, int], int] = {}  # (pass kind, width) -> passes
        self.expected: dict[str, int] = {}
        self.context: dict[str, float] = {}  # rules.context.trained_context
        self._fc_bypass = self._width_mismatch = self._unused = self._unloaded = None

    def register(self, meter, scope: dict) -> None:
        self._fc_bypass = counter(meter, EAGLE3_FC_BYPASS)
        self._width_mismatch = counter(meter, EAGLE3_WIDTH_MISMATCH)
        self._unused = counter(meter, EAGLE3_UNUSED_KEYS)
        self._unloaded = counter(meter, EAGLE3_UNLOADED_PARAMS)
        for code, c in ((names.FC_BYPASS, self._fc_bypass),
                        (names.WIDTH_MISMATCH, self._width_mismatch)):
            c.add(0, scope)  # exists from the start: healthy shows 0, not "No data"
            self.findings.count_also(code, lambda c=c: c.add(1, scope))
        for c in (self._unused, self._unloaded):
            c.add(0)
        observe(meter, EAGLE3_PASSES, lambda: [
            Observation(v, {names.ATTR_PASS_KIND: k, names.ATTR_WIDTH: w})
            for (k, w), v in dict(self.counts).items()], scope)
        observe(meter, EAGLE3_EXPECTED_WIDTH, lambda: [
            Observation(v, {names.ATTR_KIND: k}) for k, v in dict(self.expected).items()], scope)
        observe(meter, EAGLE3_DRAFT_CONTEXT, lambda: [
            Observation(v, {names.ATTR_KIND: k}) for k, v in dict(self.context).items()], scope)

    def count(self, key: tuple[str, int]) -> None:
        """One pass of (kind, width)."""
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1

    def expect(self, widths: dict[str, int]) -> None:
        """The widths a draft expects (`ExpectedWidths.as_dict()`)."""
        self.expected.update(widths)

    def note_context(self, trained: dict[str, float]) -> None:
        """What the draft's config says about its context."""
        self.context.update(trained)

    def loaded(self, unused: int, unloaded: int) -> None:
        """A load's dropped keys and unfilled parameters."""
        self._unused.add(unused)
        self._unloaded.add(unloaded)
