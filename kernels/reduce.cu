// Block all-reduce sum, y = sum(x) as one f32 (CATALOG §4, seed 002). One grid-stride template
// covers every variant: T = input type (always accumulated in f32), N = elements per pack,
// ACCESS = bytes per load. Each thread keeps U packs in flight per step, the block reduces with
// block_reduce_sum, and one atomicAdd per block adds into y (zeroed first on the same stream).
// Unlike the seed (one element per thread, one atomic per 128 elements, vec4 load before the
// bounds check), the grid is capped at what the GPU holds at once: one atomic per resident block.
// Any n and alignment: scalar head + packs + scalar tail (a single input pointer never needs the
// scalar fallback kernel: the head always realigns it).
#include "labkit.cuh"

constexpr int kThreads = 256;

template <typename T, int N>
__device__ __forceinline__ float pack_sum(const Pack<T, N>& p) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += lk_to_float(p.elem[i]);
  return s;
}

template <typename T, int N, int ACCESS>
__global__ void __launch_bounds__(kThreads) reduce_sum_kernel(const T* __restrict__ x, float* __restrict__ y,
                                                              lk_split s) {
  // ~64 bytes of loads in flight per thread before the first add needs them
  constexpr int U = sizeof(Pack<T, N>) >= 16 ? 4 : 16;
  __shared__ float scratch[32];
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const T* xp = x + s.head;
  float acc = 0.f;
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // U whole packs, all in bounds
    Pack<T, N> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<ACCESS>(r[u], xp + (p + u * stride) * N);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += pack_sum(r[u]);
  }
  for (; p < s.packs; p += stride) {
    Pack<T, N> r;
    lk_load<ACCESS>(r, xp + p * N);
    acc += pack_sum(r);
  }
  if (t < s.head + s.tail) acc += lk_to_float(x[lk_edge_index(s, N, t)]);  // scalar edges
  acc = block_reduce_sum<kThreads>(acc, scratch);
  if (threadIdx.x == 0) atomicAdd(y, acc);
}

template <typename T, int N, int ACCESS>
static int launch_reduce(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  float* y = lk_ptr<float>(args->t[1]);
  const int64_t n = args->t[0].numel;
  const void* ptrs[1] = {x};
  const lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 1);
  cudaMemsetAsync(y, 0, sizeof(float), stream);  // the blocks accumulate into y
  const int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, kThreads);
  const int64_t cap = resident_blocks(kThreads);
  reduce_sum_kernel<T, N, ACCESS><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(x, y, s);
  return lk_launch_status();
}

using bf16 = __nv_bfloat16;

// The exported launchers (`int reduce_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/reduce.py (labkit.build.export_source): `labkit list` prints them.
