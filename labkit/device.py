"""The GPU as facts (leaf layer: nothing here measures or launches): presence, properties, NVML
handle, clocks, the vendor's spec numbers, and the provenance every result row records."""
from __future__ import annotations

import datetime as _dt
import functools
import os

from .errors import ConfigError, NoGPUError
from .paths import ROOT, gpu_slug
from .toolkit import run
from .version import __version__

NO_GPU = ("No CUDA GPU is visible (torch.cuda.is_available() is False): labkit builds and times kernels "
          "only on an NVIDIA GPU. Without one, explore the recorded results shipped in results/ "
          "(`labkit recorded`, or `from labkit.explore import explore; explore()` in a notebook).")

# Vendor datasheet numbers (memory bandwidth GB/s, FP32 non-tensor TFLOP/s at boost clock), matched
# by a fragment of the name NVML/torch report, most specific first. Blank (None) when unknown.
SPECS = (
    ("H200 NVL", 4800, 60.3), ("H200", 4800, 66.9),
    ("H100 NVL", 3900, 60.3), ("H100 PCIe", 2000, 51.2), ("H100 80GB HBM3", 3350, 66.9), ("H100", 3350, 66.9),
    ("A100-SXM4-80GB", 2039, 19.5), ("A100 80GB PCIe", 1935, 19.5), ("A100", 1555, 19.5),
    ("L40S", 864, 91.6), ("L4", 300, 30.3), ("RTX 4090", 1008, 82.6), ("A10", 600, 31.2),
)


def spec(name: str) -> dict:
    """{'mem_gbps', 'fp32_tflops'} from the datasheet table, None where the GPU is not listed."""
    for frag, gbps, tflops in SPECS:
        if frag.lower() in str(name).lower():
            return {"mem_gbps": gbps, "fp32_tflops": tflops, "spec_of": frag}
    return {"mem_gbps": None, "fp32_tflops": None, "spec_of": None}


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def gpu_present() -> bool:
    """Whether this process can see a GPU, from NVML where it answers (no torch import, no CUDA
    context: the CLI decides in milliseconds what it shows), else from torch."""
    if nvml() is not None:
        try:
            return bool(visible_gpus())
        except Exception:  # noqa: BLE001 - NVML present but unusable: ask torch
            pass
    return has_gpu()


def require_gpu() -> None:
    if not has_gpu():
        raise NoGPUError(NO_GPU)


@functools.lru_cache(maxsize=None)
def nvml():
    """The initialised pynvml module, or None (no NVML, no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def nvml_handle(device: int | None = None):
    """NVML handle of torch's device (by UUID: CUDA_VISIBLE_DEVICES renumbers torch's devices, not
    NVML's), or None."""
    nv = nvml()
    if nv is None:
        return None
    try:
        import torch

        idx = torch.cuda.current_device() if device is None else device
        uuid = str(torch.cuda.get_device_properties(idx).uuid)
        return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def properties(device: int | None = None) -> dict:
    import torch

    require_gpu()
    idx = torch.cuda.current_device() if device is None else device
    p = torch.cuda.get_device_properties(idx)
    return {"gpu": p.name, "slug": gpu_slug(p.name), "cc": f"{p.major}.{p.minor}", "arch": f"{p.major}{p.minor}",
            "sm_count": p.multi_processor_count, "l2_bytes": int(getattr(p, "L2_cache_size", 50 << 20)),
            "mem_bytes": int(p.total_memory), "uuid": str(getattr(p, "uuid", "")), "driver": driver_version(),
            "index": _physical_index(idx), **spec(p.name)}


def _physical_index(idx: int) -> int:
    """The GPU's index on the host (what nvidia-smi shows): a worker is told it (LABKIT_GPU_INDEX),
    else read through CUDA_VISIBLE_DEVICES."""
    if os.environ.get("LABKIT_GPU_INDEX", "").isdigit():
        return int(os.environ["LABKIT_GPU_INDEX"])
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    parts = [v.strip() for v in vis.split(",") if v.strip()]
    if parts and idx < len(parts) and parts[idx].isdigit():
        return int(parts[idx])
    return idx


def driver_version() -> str:
    nv = nvml()
    if nv:
        try:
            v = nv.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        except Exception:
            pass
    try:
        out = run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], "nvidia-smi")
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return "unknown"


# hardware or power/thermal slowdowns (not idle or application clock settings)
_SLOW_REASONS = ("nvmlClocksEventReasonSwPowerCap", "nvmlClocksEventReasonHwSlowdown",
                 "nvmlClocksEventReasonSwThermalSlowdown", "nvmlClocksEventReasonHwThermalSlowdown",
                 "nvmlClocksEventReasonHwPowerBrakeSlowdown")


def slowdowns(nv, h) -> list:
    """The active slowdowns of the GPU `h` by name ('SwPowerCap', 'HwThermalSlowdown', ...)."""
    get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = get(h)
    return [n.replace("nvmlClocksEventReason", "") for n in _SLOW_REASONS if mask & getattr(nv, n, 0)]


def throttled(nv, h) -> bool:
    return bool(slowdowns(nv, h))


def sm_clock() -> tuple[int | None, bool]:
    """(current SM clock in MHz, throttled?) from NVML; (None, False) where it cannot be read."""
    nv, h = nvml(), nvml_handle()
    if h is None:
        return None, False
    try:
        return int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)), throttled(nv, h)
    except Exception:
        return None, False


def _git(*args) -> str | None:
    try:
        r = run(["git", *args], "git", cwd=ROOT)
        return r.stdout.strip() if r.returncode == 0 else None
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def commit() -> dict:
    """{'commit', 'dirty', 'commit_source'} read from git; $LABKIT_COMMIT overrides, and says so."""
    env = os.environ.get("LABKIT_COMMIT")
    if env:
        return {"commit": env, "dirty": None, "commit_source": "LABKIT_COMMIT"}
    head = _git("rev-parse", "--short=12", "HEAD")
    if head is None:
        return {"commit": "unknown", "dirty": None, "commit_source": "none (not a git checkout)"}
    # tracked files only: result files being written during a sweep do not make the code dirty
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return {"commit": head, "dirty": bool(status), "commit_source": "git"}


def provenance() -> dict:
    """What every result records about where and when it was measured."""
    import torch

    p = properties()
    return {"gpu": p["gpu"], "gpu_index": p["index"], "driver": p["driver"], "cuda": torch.version.cuda,
            "torch": torch.__version__, "labkit": __version__, **commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def visible_gpus() -> list:
    """[{'index', 'name', 'uuid'}] of the GPUs this process may use (CUDA_VISIBLE_DEVICES), from
    NVML where it can (no CUDA context is created), else from torch."""
    nv = nvml()
    vis = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()] \
        if "CUDA_VISIBLE_DEVICES" in os.environ else None
    if nv is not None:
        try:
            out = []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                name, uuid = nv.nvmlDeviceGetName(h), nv.nvmlDeviceGetUUID(h)
                name = name.decode() if isinstance(name, bytes) else name
                uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
                if vis is None or str(i) in vis or uuid in vis:
                    out.append({"index": i, "name": name, "uuid": uuid})
            return out
        except Exception:
            pass
    import torch

    if not torch.cuda.is_available():
        return []
    return [{"index": _physical_index(i), "name": torch.cuda.get_device_name(i),
             "uuid": str(torch.cuda.get_device_properties(i).uuid)} for i in range(torch.cuda.device_count())]


def parse_gpus(gpus) -> list | None:
    """'all' / None -> None (every visible GPU); '0,1', 1 or [0, 1] -> [0, 1]; ConfigError otherwise."""
    if gpus is None or gpus == "all":
        return None
    if isinstance(gpus, int):
        gpus = [gpus]
    if isinstance(gpus, str):
        try:
            gpus = [int(x) for x in gpus.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--gpus takes 'all' or GPU indices like 0,1, got {gpus!r}") from None
    out = list(dict.fromkeys(int(g) for g in gpus))
    if not out or any(g < 0 for g in out):
        raise ConfigError(f"--gpus takes 'all' or GPU indices >= 0, got {gpus!r}")
    return out


def resolve_gpus(gpus) -> list:
    """The visible GPUs ({'index', 'uuid', 'name'}) that `gpus` names; a clear error for others."""
    want = parse_gpus(gpus)
    found = visible_gpus()
    if not found:
        raise NoGPUError(NO_GPU)
    if want is None:
        return found
    have = {g["index"]: g for g in found}
    missing = [i for i in want if i not in have]
    if missing:
        raise ConfigError(f"--gpus {','.join(map(str, want))}: no visible GPU {', '.join(map(str, missing))}; "
                          f"visible GPUs are {', '.join(str(i) for i in have)}")
    return [have[i] for i in want]
