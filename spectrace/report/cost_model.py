"""The target's forward cost against the tokens it processes: a line fitted to every measured
forward (phase `target_forward`, timed inside verify), pooled over the batch-size buckets and
numbers of draft tokens the deployment ran, from the sums step cost keeps (`step_cost`:
seconds, squared seconds, tokens, squared tokens, seconds x tokens, requests). Pure
functions; docs/advisor.md states the model and its assumptions.

    forward(x) = a + b * x      x: the target tokens of one forward, b >= 0

Ordinary least squares over the individual forwards (the sums are what it needs), with the
residual spread giving the standard error of the fitted mean at any x. Neither part may be
negative (noise aside, a forward gets no cheaper with more tokens and costs no less than
nothing): a slope below 0 makes the line the mean (a = mean, b = 0), an intercept below 0
the line through the origin (a = 0, b = sum xy / sum xx).
With the tokens nearly constant (one batch size and one K: every verify runs the same number
of tokens) there is nothing to fit: `fit` returns None and the advisor falls back to its bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

MIN_FORWARDS = 30       # measured forwards before a fit is made
MIN_TOKEN_SPREAD = 1.0  # standard deviation of the tokens (tokens) a fit needs


@dataclass(frozen=True, slots=True)
class ForwardSums:
    """The measured forwards of one (bucket, K), or of several added up."""

    n: float = 0
    seconds: float = 0.0
    squares: float = 0.0
    tokens: float = 0.0
    tokens_squares: float = 0.0
    time_tokens: float = 0.0
    requests: float = 0.0

    def __add__(self, other: ForwardSums) -> ForwardSums:
        return ForwardSums(*(a + b for a, b in zip(self.fields(), other.fields())))

    def fields(self) -> tuple:
        return (self.n, self.seconds, self.squares, self.tokens, self.tokens_squares,
                self.time_tokens, self.requests)

    @property
    def mean_tokens(self) -> float:
        return self.tokens / self.n if self.n else 0.0

    @property
    def mean_requests(self) -> float:
        return self.requests / self.n if self.n else 0.0


@dataclass(frozen=True, slots=True)
class ForwardFit:
    """forward(x) = intercept + slope * x (seconds), fitted to `n` forwards whose tokens had
    mean `x_mean`, spread `sxx` (sum of squared deviations) and range `x_min`..`x_max`
    (the smallest and largest bucket means: the per-forward range is not kept);
    `residual_sd`: the spread of single forwards around the line."""

    intercept: float
    slope: float
    residual_sd: float
    n: float
    x_mean: float
    sxx: float
    x_min: float
    x_max: float
    origin: bool = False  # fitted through the origin (its intercept would have been < 0)

    def at(self, x: float) -> tuple[float, float]:
        """(the fitted mean forward seconds at `x` tokens, its standard error)."""
        mean = self.intercept + self.slope * x
        if self.origin:  # through the origin: sxx holds sum xx
            return mean, self.residual_sd * abs(x) / math.sqrt(self.sxx)
        se = self.residual_sd * math.sqrt(1.0 / self.n + (x - self.x_mean) ** 2 / self.sxx)
        return mean, se

    def to_json(self) -> dict:
        return {"intercept_seconds": self.intercept, "seconds_per_token": self.slope,
                "residual_sd_seconds": self.residual_sd, "forwards": self.n,
                "mean_tokens": self.x_mean, "tokens_range": [self.x_min, self.x_max]}


def fit(groups: list[ForwardSums]) -> ForwardFit | None:
    """The line through every forward of `groups`; None when there are fewer than
    `MIN_FORWARDS` or their tokens vary by less than `MIN_TOKEN_SPREAD` (sd)."""
    total = sum(groups, ForwardSums())
    n = total.n
    if n < max(MIN_FORWARDS, 3):
        return None
    x_mean, y_mean = total.tokens / n, total.seconds / n
    sxx = total.tokens_squares - n * x_mean * x_mean
    if sxx / n < MIN_TOKEN_SPREAD ** 2:
        return None
    sxy = total.time_tokens - n * x_mean * y_mean
    syy = max(total.squares - n * y_mean * y_mean, 0.0)
    slope = max(sxy / sxx, 0.0)
    means = [g.mean_tokens for g in groups if g.n]
    if y_mean - slope * x_mean < 0:  # through the origin
        slope = max(total.time_tokens / total.tokens_squares, 0.0)
        rss = max(total.squares - 2 * slope * total.time_tokens
                  + slope * slope * total.tokens_squares, 0.0)
        return ForwardFit(0.0, slope, math.sqrt(rss / (n - 1)), n, x_mean,
                          total.tokens_squares, min(means), max(means), origin=True)
    rss = max(syy - 2 * slope * sxy + slope * slope * sxx, 0.0)
    return ForwardFit(y_mean - slope * x_mean, slope, math.sqrt(rss / (n - 2)), n, x_mean,
                      sxx, min(means), max(means))
