"""Sweeps declared as data (like triton's perf_report Benchmark): an op and its axes.
`labkit sweep NAME` runs one and appends its rows to a result file as it goes."""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError


@dataclass(frozen=True)
class Sweep:
    name: str
    op: str
    variants: tuple | str = "all"        # variant names, or "all" (every variant + torch)
    dtype: str | None = None
    shapes: tuple = ()                   # () = the op's default shapes
    modes: tuple = ("cold",)
    description: str = ""
    rule: dict = field(default_factory=dict)  # StopRule overrides, e.g. {"budget_s": 0.5}


def _zoo_sweeps():
    """One sweep per kernel-zoo op (CATALOG §3-§5): every variant + torch at its default shapes."""
    from .registry import ops

    return [Sweep(name.replace("_", "-"), name, "all", None, (), ("cold",),
                  f"{op.title}: every variant + torch at its default shapes")
            for name, op in ops().items() if name not in ("add", "copy", "copy_gs")]


SWEEPS = {s.name: s for s in [
    Sweep("seed000", "add", "all", None, (), ("cold", "hot"),
          "seed 000's table: every add variant + torch at S, K in {1024, 2048, 4096}"),
    Sweep("access-width", "copy", "all", None, (), ("cold",),
          "seed 001's table: copy at 1/2/4/8/16-byte accesses, 1 MiB ... 4 GiB"),
    Sweep("copy-gs", "copy_gs", "all", None, (), ("cold",),
          "seed 003: grid-stride int / int2 / int4 copies with a capped block count"),
    *_zoo_sweeps(),
]}


def get_sweep(name: str) -> Sweep:
    if name not in SWEEPS:
        raise ConfigError(f"unknown sweep {name!r}; sweeps are {', '.join(SWEEPS)}")
    return SWEEPS[name]


def run_configs(runner, op, configs, desc: str, offset: int = 0, progress: bool = True):
    """Run (variant, shape, mode) configurations not yet in the runner's log, with a progress bar."""
    bar = _bar(len(configs), 0, desc) if progress else None
    rows = []
    for v, s, m in configs:
        if (op.name, v.name, v.dtype, op.format_shape(s), m) not in runner.log.done():
            rows.append(runner.run(op, v.name, v.dtype, s, m, offset=offset))
        if bar:
            bar.set_postfix_str(f"{v.name} {op.format_shape(s)}")
            bar.update(1)
    if bar:
        bar.close()
    return rows


def run_sweep(sweep: Sweep, runner, progress: bool = True):
    """Run every configuration not already in the runner's log (resume); returns the new rows."""
    from .ranges import nvtx_range
    from .registry import get_op
    from .runner import expand

    op = get_op(sweep.op)
    variants = sweep.variants if isinstance(sweep.variants, str) else list(sweep.variants)
    configs = expand(op, variants, sweep.dtype, list(sweep.shapes) or None, sweep.modes)
    with nvtx_range(f"sweep {sweep.name}"), nvtx_range(op.name):
        return run_configs(runner, op, configs, sweep.name, progress=progress)


def _bar(total, done, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=desc, unit="cfg")
