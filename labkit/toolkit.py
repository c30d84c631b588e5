"""The CUDA toolkit's programs (leaf layer): nvcc, cuobjdump, nvdisasm, cu++filt, found on PATH,
under $CUDA_HOME / /usr/local/cuda, or in the pip wheels (nvidia-cuda-nvcc, nvidia-cuda-cuobjdump,
nvidia-cuda-nvdisasm), so a machine with only Python can compile kernels and read their SASS."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import ToolMissingError

PIP = {"nvcc": "nvidia-cuda-nvcc", "cuobjdump": "nvidia-cuda-cuobjdump", "nvdisasm": "nvidia-cuda-nvdisasm"}


def _wheel_dirs() -> list:
    """bin/ folders of the nvidia-* wheels (nvidia/<pkg>/bin, nvidia/cu13/bin)."""
    try:
        import nvidia
    except ImportError:
        return []
    out = []
    for p in getattr(nvidia, "__path__", []):
        out += sorted(Path(p).glob("*/bin"))
    return out


def tool(name: str) -> str:
    """Path of a toolkit program, or ToolMissingError saying how to get it."""
    found = shutil.which(name)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    cands = [Path(h) / "bin" / name for h in homes if h] + [d / name for d in _wheel_dirs()]
    for c in cands:
        if c.exists():
            return str(c)
    pip = f" (pip install {PIP[name]})" if name in PIP else ""
    raise ToolMissingError(f"{name} not found on PATH, in $CUDA_HOME, /usr/local/cuda or the nvidia-* wheels{pip}")


def nvcc_path() -> str:
    return tool("nvcc")


def cuda_home() -> Path:
    """The toolkit folder for torch.utils.cpp_extension: the one holding the nvcc labkit uses."""
    try:
        return Path(nvcc_path()).resolve().parent.parent
    except ToolMissingError as e:
        raise ToolMissingError(f"{e}; kernels need nvcc to build") from None
