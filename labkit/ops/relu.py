"""Elementwise relu y = max(0, x) (CATALOG §4, seed 002). Kernels: kernels/activation.cu."""
from ._shared import unary_op


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.clamp_min(inputs[0], 0, out=outputs[0])  # torch.relu has no out=


OP = unary_op("relu", "ReLU", "Relu", lambda x: x.clamp_min(0), _torch,
              # exact: max(0, x) is representable in every dtype
              {"f32": (0.0, 0.0), "f16": (0.0, 0.0)}, 1, "one 128-bit pack of 8 halves per thread")
