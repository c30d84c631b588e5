"""Sample statistics, intervals, verdicts and the adaptive stop rule (nvbench's vocabulary: samples,
noise, stop reason).

Every interval is a bootstrap percentile interval of medians at LEVEL. A resample's median is drawn
exactly, without resampling: for sorted samples x_(1) <= ... <= x_(n), the k-th smallest of a
resample is x_(ceil(n U)) where U is the k-th smallest of n uniforms, a Beta(k, n - k + 1) draw
(and the next one above it lies a Beta(1, n - k) step further up). So a resample costs one or two
Beta draws instead of n, and a comparison of two 5000-sample rows takes a millisecond. The draws
use a fixed seed: the same rows give the same interval in every session.

A ratio of two medians (A's time over B's) gets a verdict: SAME when its interval contains 1 or
lies inside the equivalence margin, else FASTER (A takes less time) or SLOWER.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from .errors import ConfigError

LEVEL = 0.95        # the confidence level of every interval
RESAMPLES = 2000    # bootstrap draws: the interval's ends move by < 2 % of its width from seed to seed
SEED = 0
# A ratio whose whole interval lies within 1 % of 1 is SAME even where it excludes 1: two rows of one
# configuration measured one after the other can differ by more than their own intervals say
# (clock and temperature drift between rows, which samples within a row cannot see), and 1 % is
# below any difference worth choosing a kernel for. `labkit aa` measures how often this GPU's rows
# of one kernel still get a verdict other than SAME.
MARGIN = 0.01
SAME, FASTER, SLOWER = "SAME", "FASTER", "SLOWER"


def check_samples(samples, what: str = "samples", positive: bool = False) -> np.ndarray:
    """The samples as a float64 array; none, NaN or inf (or <= 0 with `positive`) raise ConfigError."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    if x.size == 0:
        raise ConfigError(f"{what}: no samples")
    bad = ~np.isfinite(x) | ((x <= 0) if positive else (x < 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(f"{what} must be finite times {'> 0' if positive else '>= 0'}; got {x[i]} at index {i}")
    return x


@dataclass(frozen=True)
class Summary:
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    n: int
    noise: float  # robust relative spread: IQR / 1.349 / median (a relative sigma for normal data)

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def summarize(samples) -> Summary:
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    noise = float((q3 - q1) / 1.349 / med) if med > 0 else float("inf")
    return Summary(float(med), float(q1), float(q3), float(x.min()), float(x.max()), float(x.mean()),
                   int(x.size), noise)


def _medians(x: np.ndarray, rng) -> np.ndarray:
    """RESAMPLES bootstrap medians of x, drawn exactly (see the module's docstring)."""
    x = np.sort(x)
    n = x.size

    def at(u):
        return x[np.clip(np.ceil(n * u).astype(np.int64) - 1, 0, n - 1)]

    k = (n + 1) // 2
    u = rng.beta(k, n - k + 1, RESAMPLES)
    if n % 2:
        return at(u)
    return (at(u) + at(u + (1 - u) * rng.beta(1, n - k, RESAMPLES))) / 2


def _ends(draws: np.ndarray, level: float) -> tuple:
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Interval:
    estimate: float
    lo: float
    hi: float

    @property
    def rel_half_width(self) -> float:
        """Half the interval's width over the estimate (inf for an estimate of 0)."""
        return (self.hi - self.lo) / 2 / self.estimate if self.estimate > 0 else math.inf


def median_interval(samples, level: float = LEVEL) -> Interval:
    """The median of `samples` with its `level` bootstrap interval."""
    x = check_samples(samples)
    return Interval(float(np.median(x)), *_ends(_medians(x, np.random.default_rng(SEED)), level))


def verdict_of(lo: float, hi: float, margin: float = MARGIN) -> str:
    """SAME, FASTER or SLOWER for an interval of a time ratio (A's time / B's)."""
    if lo <= 1 <= hi or (lo >= 1 / (1 + margin) and hi <= 1 + margin):
        return SAME
    return FASTER if hi < 1 else SLOWER


@dataclass(frozen=True)
class Verdict:
    """A's median time over B's (`ratio`), its interval and what it says of A: SAME / FASTER / SLOWER."""
    ratio: float
    lo: float
    hi: float
    verdict: str

    @property
    def decided(self) -> bool:
        return self.verdict != SAME

    def text(self, of: str = "") -> str:
        """E.g. '0.934x torch (0.925-0.943) FASTER' with of='torch'."""
        return f"{self.ratio:.3f}x{' ' + of if of else ''} ({self.lo:.3f}-{self.hi:.3f}) {self.verdict}"


def compare(a, b, level: float = LEVEL) -> Verdict:
    """A's samples (times) against B's: the ratio of their medians, its bootstrap interval, the verdict."""
    xa, xb = check_samples(a, "A's samples", positive=True), check_samples(b, "B's samples", positive=True)
    rng = np.random.default_rng(SEED)
    lo, hi = _ends(_medians(xa, rng) / _medians(xb, rng), level)
    return Verdict(float(np.median(xa) / np.median(xb)), lo, hi, verdict_of(lo, hi))


def _positive_int(name: str, x, what: str) -> None:
    if isinstance(x, bool) or not isinstance(x, Integral) or x < 1:
        raise ConfigError(f"{name} ({what}) must be a positive int, got {x!r}")


@dataclass(frozen=True)
class StopRule:
    """Sample until the median is known well enough: the half-width of its LEVEL interval is under
    `noise_target` of the median (after `min_samples` and `min_time_s` of measured time), or
    `max_samples` are taken, or `budget_s` of wall time is spent. The target is on the median, not
    on the samples' spread: a cold tiny kernel's samples scatter by 3-8 % however many are taken,
    but its median's interval narrows as 1 / sqrt(n). At the default 0.25 %, the ratio of two such
    medians is known to about ±0.35 %, so two rows of one kernel get a verdict other than SAME only
    where they differ by more than the 1 % margin less that (0.65 %, about 3.5 standard errors)
    instead of 1 in 20 times (at 0.5 % the ratio's interval, ±0.7 %, is as wide as the margin
    allows)."""

    noise_target: float = 0.0025
    min_samples: int = 10
    max_samples: int = 5000
    min_time_s: float = 0.02
    budget_s: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.budget_s, Real) and math.isfinite(self.budget_s) and self.budget_s > 0):
            raise ConfigError(f"budget_s (seconds of sampling per configuration) must be > 0 and finite, "
                              f"got {self.budget_s!r}")
        if not (isinstance(self.noise_target, Real) and 0 < self.noise_target < 1):
            raise ConfigError(f"noise_target must be in (0, 1) (the median's interval half-width to stop at, "
                              f"relative to it, e.g. 0.0025), got {self.noise_target!r}")
        _positive_int("max_samples", self.max_samples, "the sample cap")
        _positive_int("min_samples", self.min_samples, "samples before the interval is read")
        if self.min_samples > self.max_samples:
            raise ConfigError(f"need 1 <= min_samples <= max_samples, got {self.min_samples} and {self.max_samples}")
        if not (isinstance(self.min_time_s, Real) and math.isfinite(self.min_time_s) and self.min_time_s >= 0):
            raise ConfigError(f"min_time_s (measured seconds before the interval is read) must be >= 0 and finite, "
                              f"got {self.min_time_s!r}")

    def reason(self, samples_s, wall_s: float) -> str | None:
        n = len(samples_s)
        if n >= self.max_samples:
            return "max_samples"
        if wall_s >= self.budget_s:
            return "budget"
        if n >= self.min_samples and sum(samples_s) >= self.min_time_s:
            if median_interval(samples_s).rel_half_width <= self.noise_target:
                return "converged"
        return None
