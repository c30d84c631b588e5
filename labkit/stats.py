"""Sample statistics and the adaptive stop rule (nvbench's vocabulary: samples, noise, stop reason)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


@dataclass(frozen=True)
class StopRule:
    """Sample until the noise is under `noise_target` (after `min_samples` and `min_time_s` of
    measured time), or `max_samples` are taken, or `budget_s` of wall time is spent."""

    noise_target: float = 0.005
    min_samples: int = 10
    max_samples: int = 5000
    min_time_s: float = 0.02
    budget_s: float = 1.0

    def reason(self, samples_s, wall_s: float) -> str | None:
        n = len(samples_s)
        if n >= self.max_samples:
            return "max_samples"
        if wall_s >= self.budget_s:
            return "budget"
        if n >= self.min_samples and sum(samples_s) >= self.min_time_s:
            if summarize(samples_s).noise <= self.noise_target:
                return "converged"
        return None
