"""Tidy result records: one row per op x variant x dtype x shape x mode.

A ResultLog appends each row to a JSON-lines file as soon as it is measured, so an interrupted
sweep keeps its finished rows and a re-run skips them (resume)."""
from __future__ import annotations

import json
from pathlib import Path

KEY = ("op", "variant", "dtype", "shape", "mode")
COLUMNS = ["op", "variant", "dtype", "shape", "mode", "status", "time_us", "q1_us", "q3_us", "min_us", "max_us",
           "kernel_us", "samples", "noise", "stop_reason", "method", "batch", "bytes", "gbps", "pct_peak", "peak_gbps",
           "torch_us", "vs_torch", "tflops", "max_abs_err", "path", "error", "sm_clock_mhz", "throttled",
           "offset", "gpu", "driver", "cuda", "torch", "labkit", "commit", "date"]


def key(rec: dict) -> tuple:
    return tuple(rec.get(k) for k in KEY)


class ResultLog:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.rows: list[dict] = []
        if self.path and self.path.exists():
            self.rows = load_rows(self.path)

    def done(self) -> set:
        return {key(r) for r in self.rows if r.get("status") in ("ok", "failed")}

    def append(self, rec: dict) -> None:
        self.rows.append(rec)
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(rec) + "\n")

    def frame(self):
        return to_frame(self.rows)


def load_rows(path: str | Path) -> list[dict]:
    path = Path(path)
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".csv":
        import pandas as pd

        return pd.read_csv(path).to_dict("records")
    raise ValueError(f"{path}: result files are .jsonl, .json or .csv")


def to_frame(rows):
    import pandas as pd

    df = pd.DataFrame(list(rows))
    cols = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    return df[cols] if len(df) else pd.DataFrame(columns=COLUMNS)


def save(rows, path: str | Path) -> Path:
    """Write rows as .csv, .json or .jsonl by the file's suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    if path.suffix == ".csv":
        to_frame(rows).to_csv(path, index=False)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows, indent=1))
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        raise ValueError(f"{path}: choose a .csv, .json or .jsonl file")
    return path
