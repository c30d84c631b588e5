"""The one run loop. Every entry point (labkit.bench, the CLI's bench/sweep, the explorer, the labs,
the benchmarks, nsight's profiled child) hands a list of Configs to `run`, which

* skips configurations the result log already holds for this GPU, commit and stop rule (resume),
  and says what it skipped;
* hands the rest, in groups that share a torch baseline, to an executor: worker processes, one per
  GPU (`labkit.workers`, the default for benches and sweeps), this process (`Local`), or a Dask
  cluster (`labkit.cluster`);
* appends each record to the log as it arrives (so Ctrl-C keeps what was measured), with a
  progress bar over all configurations.

NVTX ranges (`<title>` > `<op>` > `<op> <variant> <shape>` > phases) are opened where the kernels
run, by `ranges.Scope`, so Nsight sees them around the kernels in worker processes too.
"""
from __future__ import annotations

import sys

from tqdm.auto import tqdm

from .cluster import DaskExecutor
from .ranges import Scope
from .records import ResultLog
from .runner import Runner
from .workers import pool


class Local:
    """Runs configurations in this process (labkit.call's world: a kernel fault here poisons the
    session's CUDA context, which is why benches and sweeps default to workers)."""

    def __init__(self, runner=None, **runner_kw):
        self.runner = runner if runner is not None else Runner(**runner_kw)
        self.scope = Scope()

    def gpus(self) -> list:
        return [0]

    def run_group(self, title: str | None, configs: list):
        """Yield the record of each configuration of one group (they share a torch baseline)."""
        getattr(self.runner, "prebuild", len)(configs)  # a stand-in runner may have nothing to build
        for cfg in configs:
            self.scope.enter(title, cfg.op)
            yield self.runner.run(cfg)

    def close(self) -> None:
        self.scope.close()


def groups(configs: list) -> list:
    """Configurations split into groups that share a baseline, each with its torch run first."""
    out: dict = {}
    for c in configs:
        out.setdefault(c.group, []).append(c)
    return [sorted(g, key=lambda c: not c.variant.is_torch) for g in out.values()]


def executor(workers=True, gpus=None, runner=None, cluster=None, **runner_kw):
    """The executor for a run: a Dask cluster, worker processes (per GPU), or this process."""
    if cluster:
        return DaskExecutor(cluster, gpus=gpus, **runner_kw)
    if runner is not None or not workers:
        return Local(runner, **runner_kw)
    return pool(gpus, **runner_kw)


def run(configs: list, log=None, ex=None, title: str | None = None, progress: bool = True, **ex_kw) -> list:
    """Run `configs` (resuming from `log`), return the records measured now. `ex` is an executor
    (default: `executor(**ex_kw)`, closed at the end)."""
    log = log if log is not None else ResultLog()
    log.lock()
    todo, skipped = log.pending(configs)
    if skipped and progress:
        print(f"labkit: {len(skipped)} of {len(configs)} configurations already in {log.path} for this GPU, "
              f"commit and stop rule: skipped (delete their rows to measure again)", file=sys.stderr)
    own = ex is None
    ex = ex if ex is not None else executor(**ex_kw)
    own = own and not getattr(ex, "shared", False)
    bar = _bar(len(todo), title or "labkit") if progress and todo else None
    rows = []
    try:
        for rec in _records(ex, title, todo):
            log.append(rec)
            rows.append(rec)
            if bar:
                bar.set_postfix_str(f"{rec['variant']} {rec['shape']} {rec['mode']}"[:40])
                bar.update(1)
    except KeyboardInterrupt:
        for rec in getattr(ex, "take_rows", list)():  # rows that arrived with the interrupt (Dask)
            log.append(rec)
            rows.append(rec)
        print(f"labkit: interrupted; {len(rows)} rows measured"
              + (f" and kept in {log.path}" if log.path and rows else "") , file=sys.stderr)
        raise
    finally:
        if bar:
            bar.close()
        if own:
            ex.close()
        log.close()
    return rows


def _records(ex, title, todo):
    if hasattr(ex, "run_all"):  # executors that spread groups over several GPUs
        yield from ex.run_all(title, groups(todo))
        return
    for g in groups(todo):
        yield from ex.run_group(title, g)


def _bar(total, desc):
    return tqdm(total=total, desc=desc, unit="cfg")

