"""A stand-in for labkit.runner.Runner on `labkit serve`'s CPU workers (no GPU): a timed
configuration sleeps (the GPU's busy time) and records when it started and ended and in which
process, so tests can see that no two timings overlap on one worker. An inline kernel's source is
read from the box's build cache, where the dispatcher wrote what the attendee sent: `source_sha`
proves which text arrived; a source with TODO is wrong (status failed), one with `__trap()` faults
(the worker process dies); `// fake_us=N` sets its time. Shipped variants have fixed times."""
import hashlib
import os
import re
import signal
import time
from pathlib import Path

TIMED_S = float(os.environ.get("LABKIT_FAKE_TIMED_S", "0.03"))  # the GPU time of one timed configuration
SHIPPED_US = {"torch": 10.0, "f16x8": 16.0, "f16x8_pack": 10.0, "f16x2": 14.0}


class SleepRunner:
    def __init__(self, **kw):
        self.phase = lambda name: None

    def prebuild(self, configs):
        return 0

    def run(self, cfg):
        v = cfg.variant
        text = Path(v.source).read_text() if v.is_inline else ""
        if "__trap()" in text:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.time()
        time.sleep(TIMED_S if cfg.timed else TIMED_S / 5)
        row = {"op": cfg.op, "variant": cfg.variant_s, "dtype": cfg.dtype, "shape": cfg.shape_s, "mode": cfg.mode,
               "offset": cfg.offset, "status": "failed" if "TODO" in text else "ok", "gpu": "Fake GPU",
               "pid": os.getpid(), "t_start": t0, "t_end": time.time(), "budget_s": cfg.rule.budget_s,
               "source_sha": hashlib.sha256(text.encode()).hexdigest()[:12] if text else None}
        if cfg.timed and row["status"] == "ok":
            m = re.search(r"fake_us=([0-9.]+)", text)
            row["time_us"] = float(m.group(1)) if m else SHIPPED_US.get(v.name, 12.0)
        return row
