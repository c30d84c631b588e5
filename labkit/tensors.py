"""Input/output allocation for ops: random data, misaligned views, poisoned outputs."""
from __future__ import annotations

import math

from .dtypes import torch_dtype


def alloc(shape, dtype: str, offset: int = 0, device: str = "cuda"):
    """An uninitialised tensor of `shape` whose data starts `offset` elements into its storage
    (offset > 0 gives a view that is not 16-byte aligned)."""
    import torch

    if offset == 0:  # the common case (labkit.call) in one allocation, no view
        return torch.empty(shape, dtype=torch_dtype(dtype), device=device)
    n = math.prod(shape)
    base = torch.empty(n + offset, dtype=torch_dtype(dtype), device=device)
    return base[offset:offset + n].view(shape)


def randn(shape, dtype: str, gen, offset: int = 0):
    import torch

    t = alloc(shape, dtype, offset)
    if dtype in ("u8", "i32"):
        info = torch.iinfo(t.dtype)
        # drawn in the tensor's own dtype: an int64 draw of a 4 GiB byte buffer would need 32 GiB
        t.copy_(torch.randint(info.min, info.max, t.shape, generator=gen, device=t.device, dtype=t.dtype))
    else:
        t.copy_(torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float32))
    return t
