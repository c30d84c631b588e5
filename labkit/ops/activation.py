"""Elementwise activations (CATALOG §4, seed 002): relu y = max(0, x) and sigmoid y = 1 / (1 + e^-x).
Kernels: kernels/activation.cu (one template, the functor picks the function)."""
from .families import unary_op


def _relu_torch(inputs, outputs, shape, dtype):
    import torch

    torch.clamp_min(inputs[0], 0, out=outputs[0])  # torch.relu has no out=


def _sigmoid_torch(inputs, outputs, shape, dtype):
    import torch

    torch.sigmoid(inputs[0], out=outputs[0])


OPS = [
    unary_op("relu", "ReLU", "Relu", lambda x: x.clamp_min(0), _relu_torch,
             # exact: max(0, x) is representable in every dtype
             {"f32": (0.0, 0.0), "f16": (0.0, 0.0)}, 1, "one 128-bit pack of 8 halves per thread"),
    unary_op("sigmoid", "Sigmoid", "Sigmoid", lambda x: x.sigmoid(), _sigmoid_torch,
             # f32: expf + IEEE divide are a few ulp; f16: one rounding of the f32 result
             {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5)}, 4,
             "one 128-bit pack of 8 halves per thread, f32 math with __expf"),
]
