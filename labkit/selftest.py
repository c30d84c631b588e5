"""The A/A self-test (`labkit.aa`, `labkit aa OP VARIANT SHAPE`): one configuration measured as
`pairs` pairs of rows, one row after the other, through the one run loop (labkit.session, worker
processes by default) with the same stop rule as any bench, and each pair compared as any two rows
are (labkit.verdicts.compare_rows). Both rows of a pair are the same kernel, so every verdict other
than SAME is a false one: their share is this GPU's false-verdict rate for that configuration."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError, LabkitError
from .schema import key
from .verdicts import compare_rows

PAIRS = 20
SAME_GOAL = 0.95  # the share of A/A pairs that must say SAME for verdicts on this GPU to be trusted


@dataclass
class AAResult:
    config: str
    rows: list       # A then B of each pair, with `aa_pair` and `aa_side`
    verdicts: list   # a stats.Verdict per pair

    @property
    def not_same(self) -> int:
        """Pairs called FASTER or SLOWER: false verdicts, since both rows are the same kernel."""
        return sum(v.decided for v in self.verdicts)

    @property
    def false_rate(self) -> float:
        return self.not_same / len(self.verdicts)

    @property
    def ok(self) -> bool:
        return 1 - self.false_rate >= SAME_GOAL

    def text(self) -> str:
        from .stats import LEVEL, MARGIN

        a, b = self.rows[0::2], self.rows[1::2]
        lines = [f"A/A self-test: {self.config} on {self.rows[0].get('gpu')}, {len(self.verdicts)} pairs "
                 f"(A then B, the same kernel); verdict by the {LEVEL:.0%} interval of the ratio of medians, "
                 f"margin {MARGIN:.0%}"]
        lines += [f"  pair {i + 1:2}: A {ra['time_us']:9.3f} µs ({ra['samples']} samples, {ra['stop_reason']}), "
                  f"B {rb['time_us']:9.3f} µs ({rb['samples']} samples, {rb['stop_reason']}): A/B {v.text()}"
                  for i, (ra, rb, v) in enumerate(zip(a, b, self.verdicts))]
        n = self.not_same
        lines.append(f"false verdicts: {n} of {len(self.verdicts)} pairs not SAME ({self.false_rate:.0%}); "
                     + ("PASS" if self.ok else "FAIL") + f" (at least {SAME_GOAL:.0%} SAME wanted)")
        return "\n".join(lines)


def from_rows(rows) -> AAResult:
    """An A/A result read back from its saved rows (`labkit aa ... --json`: A then B of each pair)."""
    if not rows or len(rows) % 2:
        raise ConfigError(f"A/A rows come in A/B pairs; got {len(rows or [])} rows")
    return AAResult(" ".join(map(str, key(rows[0]))), list(rows), [compare_rows(a, b) for a, b in zip(rows[0::2], rows[1::2])])


def aa(op, variant, shape=None, dtype=None, mode: str = "cold", pairs: int = PAIRS, rule=None, progress: bool = True,
       workers: bool = True, gpus=None, kernel_time: bool = False, energy: bool = False, **overrides) -> AAResult:
    """Measure one configuration as `pairs` A/B pairs of the same kernel and return the verdict of
    each pair and the share that is not SAME (`.false_rate`, `.text()`). The run loop, executor
    settings and stop rule are labkit.bench's (`rule`, a StopRule or dict, and keyword overrides
    such as budget_s=0.5)."""
    from .config import make_rule, resolve
    from .records import ResultLog
    from .session import run

    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise ConfigError(f"pairs (A/A pairs to measure) must be an int >= 1, got {pairs!r}")
    cfg = resolve(op, variant, dtype, shape, mode, rule=make_rule(rule, **overrides))
    rows = run([cfg] * (2 * pairs), ResultLog(), title=f"aa {cfg.op}", progress=progress, workers=workers, gpus=gpus,
               kernel_time=kernel_time, energy=energy)
    bad = next((r for r in rows if r.get("status") != "ok"), None)
    if bad is not None or len(rows) != 2 * pairs:
        why = f"{bad.get('status')}: {bad.get('error')}" if bad else f"{len(rows)} of {2 * pairs} rows came back"
        raise LabkitError(f"A/A of {cfg.describe()}: no verdicts ({why})")
    for i, r in enumerate(rows):
        r.update(aa_pair=i // 2 + 1, aa_side="AB"[i % 2])
    verdicts = [compare_rows(a, b) for a, b in zip(rows[0::2], rows[1::2])]
    if any(v is None for v in verdicts):
        raise LabkitError(f"A/A of {cfg.describe()}: rows without samples (not timed?)")
    return AAResult(cfg.describe(), rows, verdicts)
