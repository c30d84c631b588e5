"""Tidy result records: one row per op x variant x dtype x shape x mode, and the files they live in.

A ResultLog appends each row to a JSON-lines file as soon as it is measured: whole lines, flushed
and fsynced, under a lock that keeps a second writer out. Readers skip a malformed line (a killed
write, a full disk, a merge conflict) with a warning naming file and line, and keep the rest.
Resume matches rows by configuration, GPU, commit and stop rule, and says what it skipped.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from .errors import ConfigError, LabkitError

KEY = ("op", "variant", "dtype", "shape", "mode")
RULE = ("noise_target", "budget_s", "max_samples")
COLUMNS = ["op", "variant", "dtype", "shape", "mode", "status", "time_us", "kernel_us", "kernels", "overhead_us", "floor_us",
           "host_bound", "q1_us", "q3_us", "min_us", "max_us", "ci_lo_us", "ci_hi_us", "samples", "noise",
           "stop_reason", "converged", "noise_target", "budget_s", "max_samples", "method", "batch", "blocking",
           "bytes", "gbps", "kernel_gbps", "pct_peak", "peak_gbps", "peak_ref", "pct_spec", "spec_gbps", "flops", "tflops",
           "pct_fma", "intensity", "torch_us", "vs_torch", "vs_torch_lo", "vs_torch_hi", "vs_torch_verdict",
           "torch_kernel_us", "vs_torch_kernel", "max_abs_err", "recheck", "path", "error",
           "sm_clock_mhz", "throttled", "power_w", "energy_per_launch_j", "gb_per_j", "offset", "gpu", "gpu_index",
           "driver", "cuda", "torch", "labkit", "commit", "dirty", "commit_source", "date"]
STRING_COLUMNS = ("op", "variant", "dtype", "shape", "mode", "status", "stop_reason", "vs_torch_verdict", "method",
                  "blocking", "peak_ref", "recheck", "path", "error", "gpu", "driver", "cuda", "torch", "labkit",
                  "commit", "commit_source", "date", "kernel", "nvml")
SUFFIXES = (".jsonl", ".json", ".csv")


def key(rec: dict) -> tuple:
    return tuple(rec.get(k) for k in KEY)


class LogBusy(LabkitError):
    """Another process is writing this results file."""


def check_output(path, suffixes=SUFFIXES, what: str = "output file") -> Path:
    """Validate a path before anything is measured: a known suffix, not a folder, writable."""
    p = Path(path)
    if p.suffix not in suffixes:
        raise ConfigError(f"{what} {p}: the suffix must be one of {', '.join(suffixes)}, got {p.suffix or 'none'!r}")
    if p.is_dir():
        raise ConfigError(f"{what} {p} is a folder; give a file name ending in {'/'.join(suffixes)}")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{what} {p}: cannot create its folder ({e.strerror})") from None
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{what} {p} is not writable")
    return p


class ResultLog:
    """Rows in memory, and (with `path`, a .jsonl file) on disk as they are measured."""

    def __init__(self, path: str | Path | None = None):
        self.path = check_output(path, (".jsonl",), "results file") if path else None
        self.rows: list = load_rows(self.path) if self.path and self.path.exists() else []
        self._lock = None

    def lock(self) -> "ResultLog":
        """Keep other writers out until close(); LogBusy names the holder."""
        if self.path is None or self._lock is not None:
            return self
        from filelock import FileLock, Timeout

        lk = FileLock(str(self.path) + ".lock")
        try:
            lk.acquire(timeout=0)
        except Timeout:
            raise LogBusy(f"another labkit process is writing {self.path}; wait for it, or choose another file "
                          "(two writers would measure the same configurations and interleave their rows)") from None
        self._lock = lk
        return self

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            Path(self._lock.lock_file).unlink(missing_ok=True)
            self._lock = None

    def covers(self, rec: dict, cfg, gpus, commit: dict) -> bool:
        return (key(rec) == cfg.key and rec.get("status") in ("ok", "failed") and rec.get("gpu") in gpus
                and rec.get("commit") == commit["commit"] and not commit.get("dirty") and not rec.get("dirty")
                and all(rec.get(k) == getattr(cfg.rule, k) for k in RULE) and rec.get("offset", 0) == cfg.offset)

    def pending(self, configs, gpus=None) -> tuple:
        """(configurations to measure, configurations skipped because a row covers them: same
        configuration, a GPU of this run, this commit (clean tree) and the same stop rule)."""
        if not self.rows:
            return list(configs), []
        from .device import commit, visible_gpus

        gpus = set(gpus or [g["name"] for g in visible_gpus()])
        c = commit()
        by_key: dict = {}
        for r in self.rows:
            by_key.setdefault(key(r), []).append(r)
        todo, skipped = [], []
        for cfg in configs:
            done = any(self.covers(r, cfg, gpus, c) for r in by_key.get(cfg.key, ()))
            (skipped if done else todo).append(cfg)
        return todo, skipped

    def append(self, rec: dict) -> None:
        self.rows.append(rec)
        if self.path:
            self.lock()
            line = json.dumps(rec, default=str) + "\n"  # one write of one whole line
            with self.path.open("a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())

    def frame(self):
        return to_frame(self.rows)


def load_rows(path: str | Path) -> list:
    """Rows of a .jsonl / .json / .csv results file. A malformed .jsonl line is skipped with a
    warning naming the file and line."""
    from .energy import per_launch

    return [_loop_energy(r, per_launch) for r in _load(path)]


def _loop_energy(row: dict, per_launch) -> dict:
    """A row whose energy was divided over a timed loop (idle time between samples included: see
    labkit.energy.sustained) keeps that figure as `loop_energy_per_sample_j`, never as energy per
    launch or GB/J."""
    if row.get("energy_per_launch_j") and not per_launch(row):
        row = dict(row, loop_energy_per_sample_j=row["energy_per_launch_j"])
        row.pop("energy_per_launch_j")
        row.pop("gb_per_j", None)
    return row


def _load(path) -> list:
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    if not isinstance(r, dict):
                        raise ValueError("not a JSON object")
                    rows.append(r)
                except ValueError as e:
                    warnings.warn(f"{path}:{n}: skipped a malformed line ({e}); the other rows are kept", stacklevel=2)
        return rows
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            raise LabkitError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, list):
            raise LabkitError(f"{path}: expected a JSON list of rows")
        return data
    if path.suffix == ".csv":
        return _read_csv(path)
    raise ConfigError(f"{path}: result files are .jsonl, .json or .csv")


def _read_csv(path: Path) -> list:
    """CSV rows with strings kept as strings (a commit like 67179e8 is not a number)."""
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    out = []
    for r in df.to_dict("records"):
        row = {}
        for k, v in r.items():
            if k in STRING_COLUMNS or v == "":
                row[k] = v if v != "" else None
            elif v in ("True", "False"):
                row[k] = v == "True"
            else:
                try:
                    row[k] = int(v) if v.lstrip("-").isdigit() else float(v)
                except ValueError:
                    row[k] = v
        out.append(row)
    return out


def to_frame(rows):
    import pandas as pd

    df = pd.DataFrame(list(rows))
    cols = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    return df[cols] if len(df) else pd.DataFrame(columns=COLUMNS)


def save(rows, path: str | Path) -> Path:
    """Write rows as .csv, .json or .jsonl by the file's suffix (atomically: a temp file, renamed)."""
    path = check_output(path)
    rows = list(rows)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if path.suffix == ".csv":
        to_frame(rows).to_csv(tmp, index=False)
    elif path.suffix == ".json":
        tmp.write_text(json.dumps(rows, indent=1, default=str))
    else:
        tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    tmp.replace(path)
    return path
