// Elementwise activations y = f(x) (CATALOG §4, seed 002): sigmoid 1/(1+e^-x) and relu max(0,x).
// One template covers every variant (as add.cu): F = the function, T = element type,
// N = elements per thread, ACCESS = bytes per memory instruction. Math is f32 for every type.
// Any n and any alignment: scalar head + packs + scalar tail, or the scalar kernel when x and y
// are misaligned differently (reported as LK_PATH_FALLBACK).
//   variants   relu and sigmoid each: f32 f32x4 | f16 f16x8_pack (N = 1, 4, 1, 8; one access per pack),
//              the unary_op lines of labkit/ops/activation.py (`labkit list relu`)
//   reference  labkit/ops/activation.py: the function in float64 (x.clamp_min(0), x.sigmoid())
//   below      the functions (Sigmoid, Relu), unary_kernel, launch_unary; the exported launchers are generated
#include "labkit.cuh"

// ---- the functions: f32 in, f32 out -----------------------------------------------------------------
struct Sigmoid {
  // f32 output: expf + IEEE divide (a few ulp). f16 output: the fast intrinsics are far inside
  // half precision and halve the instruction count (8 halves per thread must keep up with DRAM).
  template <typename T> __device__ __forceinline__ float apply(float x) const {
    if constexpr (std::is_same_v<T, float>) return 1.f / (1.f + expf(-x));
    else return __fdividef(1.f, 1.f + __expf(-x));  // x << 0: 1/inf = 0, as it should
  }
};
struct Relu {
  // x < 0 ? 0 : x (not fmaxf) so a NaN input gives NaN, as torch.relu does
  template <typename T> __device__ __forceinline__ float apply(float x) const { return x < 0.f ? 0.f : x; }
};

// ---- kernel ---------------------------------------------------------------------------------------
template <typename F, typename T, int N, int ACCESS>
__global__ void unary_kernel(const T* __restrict__ x, T* __restrict__ y, lk_split s) {
  const F f;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < s.packs) {
    const int64_t i = s.head + t * N;
    Pack<T, N> rx, ry;
    lk_load<ACCESS>(rx, x + i);
#pragma unroll
    for (int k = 0; k < N; ++k) ry.elem[k] = lk_from_float<T>(f.template apply<T>(lk_to_float(rx.elem[k])));
    lk_store<ACCESS>(y + i, ry);
  }
  if (t < s.head + s.tail) {  // scalar edges
    const int64_t i = lk_edge_index(s, N, t);
    y[i] = lk_from_float<T>(f.template apply<T>(lk_to_float(x[i])));
  }
}

// ---- launcher: t[0] = x, t[1] = y -----------------------------------------------------------------
template <typename F, typename T, int N, int ACCESS>
static int launch_unary(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  T* y = lk_ptr<T>(args->t[1]);
  const int64_t n = args->t[1].numel;
  const int threads = 256;
  const void* ptrs[2] = {x, y};
  lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 2);
  if (!s.vector) {
    lk_split scalar = lk_make_split(n, 1, sizeof(T), ptrs, 2);
    unary_kernel<F, T, 1, sizeof(T)><<<ceil_div<int64_t>(n, threads), threads, 0, stream>>>(x, y, scalar);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  const int64_t blocks = ceil_div<int64_t>(work > 0 ? work : 1, threads);
  unary_kernel<F, T, N, ACCESS><<<blocks, threads, 0, stream>>>(x, y, s);
  return lk_launch_status();
}

// The exported launchers (`int activation_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/activation.py (labkit.build.export_source): `labkit list` prints them.
