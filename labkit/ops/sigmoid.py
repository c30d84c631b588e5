"""Elementwise sigmoid y = 1 / (1 + e^-x) (CATALOG §4, seed 002). Kernels: kernels/activation.cu."""
from ._shared import unary_op


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.sigmoid(inputs[0], out=outputs[0])


OP = unary_op("sigmoid", "Sigmoid", "Sigmoid", lambda x: x.sigmoid(), _torch,
              # f32: expf + IEEE divide are a few ulp; f16: one rounding of the f32 result
              {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5)}, 4,
              "one 128-bit pack of 8 halves per thread, f32 math with __expf")
