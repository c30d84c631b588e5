"""The GPU: presence, properties, clocks, provenance, and the measured copy peak (cached)."""
from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import subprocess
from pathlib import Path

from . import __version__
from .errors import NoGPUError

NO_GPU = ("No CUDA GPU is visible (torch.cuda.is_available() is False): labkit builds and times kernels "
          "only on an NVIDIA GPU. Without one, explore the recorded results shipped in results/ "
          "(`from labkit.explore import explore; explore()` in a notebook, or `labkit recorded` in a shell).")


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def require_gpu() -> None:
    if not has_gpu():
        raise NoGPUError(NO_GPU)


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def properties() -> dict:
    import torch

    require_gpu()
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"gpu": p.name, "cc": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
            "l2_bytes": int(getattr(p, "L2_cache_size", 50 << 20)), "mem_bytes": int(p.total_memory),
            "uuid": str(getattr(p, "uuid", "")), "driver": driver_version()}


def driver_version() -> str:
    nv = _nvml()
    if nv:
        try:
            v = nv.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        except Exception:
            pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return "unknown"


def sm_clock() -> tuple[int | None, bool]:
    """(current SM clock in MHz, throttled?) from NVML; (None, False) where it cannot be read.
    Throttled means a hardware or power/thermal slowdown reason is active."""
    nv = _nvml()
    if nv is None:
        return None, False
    try:
        import torch

        h = nv.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        mhz = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons") \
            else nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        slow = 0
        for name in ("nvmlClocksEventReasonSwPowerCap", "nvmlClocksEventReasonHwSlowdown",
                     "nvmlClocksEventReasonSwThermalSlowdown", "nvmlClocksEventReasonHwThermalSlowdown",
                     "nvmlClocksEventReasonHwPowerBrakeSlowdown"):
            slow |= getattr(nv, name, 0)
        return int(mhz), bool(reasons & slow)
    except Exception:
        return None, False


@functools.lru_cache(maxsize=None)
def commit() -> str:
    env = os.environ.get("LABKIT_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=Path(__file__).resolve().parent).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except Exception:
        return "unknown"


def provenance() -> dict:
    """What every result records about where and when it was measured."""
    import torch

    p = properties()
    return {"gpu": p["gpu"], "driver": p["driver"], "cuda": torch.version.cuda, "torch": torch.__version__,
            "labkit": __version__, "commit": commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _peak_file() -> Path:
    from .build import cache_root

    p = properties()
    key = (p["uuid"] or p["gpu"]).replace(" ", "_").replace("/", "_")
    return cache_root() / f"copy-peak-{key}-{p['driver']}.json"


def copy_peak(remeasure: bool = False) -> dict:
    """This device's copy bandwidth (bytes read + written per second), measured once and cached:
    the best of torch's device-to-device copy and labkit's 16-byte copy over 1 GiB (≫ L2)."""
    f = _peak_file()
    if f.exists() and not remeasure:
        return json.loads(f.read_text())
    import torch

    from .timing import measure_callable
    from .stats import StopRule

    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    rule = StopRule(noise_target=0.01, min_samples=10, max_samples=50, budget_s=2.0)
    t_torch = measure_callable(lambda: dst.copy_(src), mode="hot", rule=rule).summary.median
    from .runner import launcher_for
    from .registry import get_op

    run16 = launcher_for(get_op("copy"), get_op("copy").variant("w16"))
    t_lk = measure_callable(lambda: run16([src, dst], (), ()), mode="hot", rule=rule).summary.median
    best = min(t_torch, t_lk)
    result = {"peak_gbps": 2 * n / best / 1e9, "torch_copy_gbps": 2 * n / t_torch / 1e9,
              "labkit_w16_gbps": 2 * n / t_lk / 1e9, "bytes": n, **provenance()}
    f.write_text(json.dumps(result, indent=1))
    return result
