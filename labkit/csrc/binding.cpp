// The one torch binding: torch.ops.labkit.launch(fn, stream, tensors, ints, floats) -> path.
// It turns tensors into the plain lk_args ABI and calls a launcher (by address, resolved from a
// kernel library with ctypes) on the given CUDA stream. Kernel sources never include torch,
// so they build in seconds; this file is built once per torch/CUDA version.
#include <torch/library.h>
#include <ATen/core/Tensor.h>
#include "lk_abi.h"

typedef int (*lk_launch_fn)(const lk_args*, void* stream);

// `stream` is torch.cuda.current_stream().cuda_stream: passing it keeps this file free of CUDA
// headers, so it also builds against CPU-only torch (CI checks it compiles).
static int64_t launch(int64_t fn, int64_t stream, at::TensorList tensors, at::IntArrayRef ints,
                      at::ArrayRef<double> floats) {
  TORCH_CHECK(fn != 0, "labkit: null launcher address");
  TORCH_CHECK(tensors.size() <= LK_MAX_TENSORS, "labkit: at most ", LK_MAX_TENSORS, " tensors");
  TORCH_CHECK(ints.size() <= LK_MAX_PARAMS && floats.size() <= LK_MAX_PARAMS,
              "labkit: at most ", LK_MAX_PARAMS, " int and float parameters");
  lk_args args{};
  args.nt = static_cast<int32_t>(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor& t = tensors[k];
    TORCH_CHECK(t.is_cuda(), "labkit: tensor ", k, " is on ", t.device(), ", expected a CUDA tensor");
    TORCH_CHECK(t.is_contiguous(), "labkit: tensor ", k, " is not contiguous");
    TORCH_CHECK(t.dim() <= 4, "labkit: tensor ", k, " has ", t.dim(), " dims, at most 4 supported");
    lk_tensor& d = args.t[k];
    d.data = t.data_ptr();
    d.numel = t.numel();
    d.ndim = static_cast<int32_t>(t.dim());
    d.itemsize = static_cast<int32_t>(t.element_size());
    for (int64_t i = 0; i < t.dim(); ++i) d.size[i] = t.size(i);
  }
  for (size_t i = 0; i < ints.size(); ++i) args.i[i] = ints[i];
  for (size_t i = 0; i < floats.size(); ++i) args.f[i] = floats[i];
  // < 0: a CUDA error code, turned into a message on the Python side.
  return reinterpret_cast<lk_launch_fn>(fn)(&args, reinterpret_cast<void*>(stream));
}

TORCH_LIBRARY(labkit, m) {
  m.def("launch(int fn, int stream, Tensor[] tensors, int[] ints, float[] floats) -> int", &launch);
}
