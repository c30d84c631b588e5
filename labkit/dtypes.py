"""The element types labkit knows, in one table (leaf layer): name, torch dtype, C++ type for the
kernel templates, bytes per element, and the tolerance a float64 reference check allows."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class DType:
    name: str
    torch: str          # attribute of the torch module
    ctype: str          # what the kernel templates take
    itemsize: int
    rtol: float
    atol: float


DTYPES = {d.name: d for d in (
    DType("f32", "float32", "float", 4, 1.3e-6, 1e-5),
    DType("f16", "float16", "__half", 2, 1e-3, 1e-5),
    DType("bf16", "bfloat16", "__nv_bfloat16", 2, 8e-3, 1e-5),
    DType("u8", "uint8", "uint8_t", 1, 0.0, 0.0),
    DType("i32", "int32", "int", 4, 0.0, 0.0),
)}


def get(name: str) -> DType:
    if name not in DTYPES:
        raise ConfigError(f"unknown dtype {name!r}; labkit dtypes are {', '.join(DTYPES)}")
    return DTYPES[name]


def torch_dtype(name: str):
    import torch

    return getattr(torch, get(name).torch)


def dtype_name(torch_dt) -> str:
    for d in DTYPES.values():
        if str(torch_dt) == f"torch.{d.torch}":
            return d.name
    raise ConfigError(f"dtype {torch_dt} is not supported; labkit dtypes are {', '.join(DTYPES)}")


def itemsize(name: str) -> int:
    return get(name).itemsize
