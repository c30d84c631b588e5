"""This device's measured ceilings, measured once per GPU and stored in the results folder
(`results/<gpu-slug>/device.json`, one entry per GPU UUID, with provenance), so every row that
quotes `% peak` names the measurement it used (`peak_ref`):

* copy_peak_gbps: the best of torch's `copy_` and labkit's 16-byte copy over 1 GiB, hot (bytes
  read + written: the DRAM ceiling of the roofline);
* l2_gbps: labkit's 16-byte copy of a quarter of the L2, hot (it stays in L2);
* fma_tflops: the harness's FMA-chain kernel (8 independent chains per thread) over every SM;
* floor: per mode, the empty launch's event time, its CUPTI kernel time and their difference,
  the event overhead a row's `time_us - kernel_us` is compared with (`host_bound`);
* spec: the datasheet numbers (labkit.device.SPECS), blank where unknown.
`labkit peak` prints them; `labkit peak --remeasure` measures again.

Ceilings only from clean runs: where CUPTI is not free (under Nsight Systems / Compute) the event
floor is inflated and has no kernel time (3.5-4.0 µs cold, 1.0-1.1 µs hot instead of 2.7-2.9 and
0.07-0.14 on the H100 and H200), so `measure` refuses to run there, and an entry marked
`profiled: true` (written by an older labkit under a profiler) is never a floor or a `% peak`
reference. The entry in force for a GPU model (`in_force`) is the newest clean one; older entries
stay in the file. Under a profiler, rows use this card's clean entry, else the one in force for
its model, else none (no `% peak`, no floor).
"""
from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

from filelock import FileLock

from . import cache_states, device
from .cupti import cupti_free
from .errors import LabkitError
from .launch import harness_launcher, launcher_for
from .paths import cache_root, results_dir, write_atomic
from .registry import get_op
from .stats import StopRule
from .timing import measure as timed

COPY_BYTES = 1 << 30
FMA_ITERS = 4096


def facts_file(slug: str, root=None) -> Path:
    return results_dir(root) / slug / "device.json"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        print(f"labkit: ignoring unreadable {path} ({e}); measuring again", file=sys.stderr)
        return {}


def _write(path: Path, uuid: str, entry: dict) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the lock file stays: deleting it after the release lets a second writer in (filelock's docs)
        with FileLock(str(path) + ".lock"):
            data = _read(path)
            data.setdefault("devices", {})[uuid] = entry
            return write_atomic(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError as e:  # a read-only checkout: keep it in the cache instead
        alt = cache_root() / "device" / path.parent.name / "device.json"
        print(f"labkit: cannot write {path} ({e}); keeping the ceilings in {alt}", file=sys.stderr)
        return _write(alt, uuid, entry) if alt != path else path


def in_force(entries, gpu: str | None = None) -> dict | None:
    """Of a device.json's entries (of `gpu`, a model name, when given), the one rows are compared
    with: the newest measured outside a profiler; None when there is none."""
    clean = [e for e in entries if not e.get("profiled") and (gpu is None or e.get("gpu") == gpu)]
    return max(clean, key=lambda e: str(e.get("date", "")), default=None)


def ref_of(slug: str, entry: dict) -> str:
    """How a row names the entry it was compared with (`peak_ref`)."""
    return f"{slug}/device.json#{str(entry.get('uuid', ''))[:13]}@{str(entry.get('date', ''))[:10]}"


def device_facts(remeasure: bool = False, root=None) -> dict | None:
    """The ceilings of this process's GPU: read from the results folder, measured if absent (not
    under a profiler: then another clean entry of this model, or None)."""
    p = device.properties()
    return _facts(p["slug"], p["uuid"], p["gpu"], remeasure, str(results_dir(root)))


@functools.lru_cache(maxsize=None)
def _devices(slug, root):
    return _read(facts_file(slug, root)).get("devices", {})


def _facts(slug, uuid, gpu, remeasure, root):
    entry = None if remeasure else _devices(slug, root).get(uuid)
    if entry is not None and entry.get("profiled"):
        entry = None  # measured under a profiler: measure again where CUPTI is free
    if entry is None and not cupti_free() and not remeasure:
        entry = in_force(_devices(slug, root).values(), gpu)  # another card of this model, measured clean
        if entry is None:
            print(f"labkit: no ceilings of {gpu} measured outside a profiler under {root}; rows get no % peak "
                  "and no event floor (run `labkit peak` without Nsight)", file=sys.stderr)
            return None
    elif entry is None:
        clean_run()
        entry = measure()
        path = _write(facts_file(slug, root), uuid, entry)
        entry["file"] = str(path)
        _devices.cache_clear()
    return {**entry, "ref": ref_of(slug, {"uuid": uuid, **entry})}


def clean_run() -> None:
    """Raise unless CUPTI is free in this process: ceilings come only from runs outside a profiler."""
    if not cupti_free():
        raise LabkitError("ceilings are measured only where CUPTI is free: this process runs under Nsight "
                          f"(CUDA_INJECTION64_PATH={os.environ.get('CUDA_INJECTION64_PATH')}), whose interception "
                          "inflates the event floor and holds CUPTI; run `labkit peak --remeasure` without it")


def measure() -> dict:
    """Measure every ceiling of this GPU now (about 5-10 s). Refused under a profiler."""
    import torch

    clean_run()
    p = device.properties()
    rule = StopRule(noise_target=0.01, min_samples=10, max_samples=200, budget_s=1.0)
    copy = get_op("copy")
    w16 = launcher_for(copy, copy.variant("w16"))

    src = torch.randint(0, 255, (COPY_BYTES,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t_torch = timed(lambda: dst.copy_(src), "hot", rule).summary.median
    t_lk = timed(w16.prepare([src, dst]), "hot", rule).summary.median
    del src, dst
    best = min(t_torch, t_lk)

    n2 = max(1 << 20, p["l2_bytes"] // 4)  # read + write = half the L2
    a = torch.randint(0, 255, (n2,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t_l2 = timed(w16.prepare([a, b]), "hot", rule).summary.median
    del a, b

    blocks = p["sm_count"] * 8
    out = torch.empty(blocks * 256, dtype=torch.float32, device="cuda")
    fma = harness_launcher("lk_fma").prepare([out], (FMA_ITERS, blocks))
    t_fma = timed(fma, "hot", rule).summary.median
    flops = 2 * 8 * FMA_ITERS * blocks * 256

    empty = harness_launcher("lk_empty").prepare([])
    floor = {}
    for mode in cache_states.names():
        m = timed(empty, mode, rule, kernels=True)  # events and CUPTI on the same launches
        ev, k = m.summary.median * 1e6, (m.kernels or {}).get("kernel_us")
        # without a kernel time the overhead is unknown: never the whole event time
        floor[mode] = {"event_us": ev, "kernel_us": k, "overhead_us": ev - k if k is not None else None,
                       "cupti": (m.kernels or {}).get("cupti", "off")}
    torch.cuda.synchronize()
    return {"copy_peak_gbps": 2 * COPY_BYTES / best / 1e9, "torch_copy_gbps": 2 * COPY_BYTES / t_torch / 1e9,
            "labkit_w16_gbps": 2 * COPY_BYTES / t_lk / 1e9, "copy_bytes": COPY_BYTES,
            "l2_gbps": 2 * n2 / t_l2 / 1e9, "l2_copy_bytes": n2,
            "fma_tflops": flops / t_fma / 1e12, "floor": floor,
            "spec": {k: p[k] for k in ("mem_gbps", "fp32_tflops", "spec_of")},
            "uuid": p["uuid"], "sm_count": p["sm_count"], "l2_bytes": p["l2_bytes"], "profiled": False,
            **device.provenance()}
