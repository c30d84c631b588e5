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
    unary_op("relu", title="ReLU", functor="Relu", reference=lambda x: x.clamp_min(0), torch_impl=_relu_torch,
             # exact: max(0, x) is representable in every dtype
             tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0)}, flops_per_element=1,
             f16x8_note="one 128-bit pack of 8 halves per thread"),
    unary_op("sigmoid", title="Sigmoid", functor="Sigmoid", reference=lambda x: x.sigmoid(), torch_impl=_sigmoid_torch,
             # f32: expf + IEEE divide are a few ulp; f16: one rounding of the f32 result
             tolerance={"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5)}, flops_per_element=4,
             f16x8_note="one 128-bit pack of 8 halves per thread, f32 math with __expf"),
]
