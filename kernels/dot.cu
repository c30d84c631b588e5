// Dot product, y = sum(a * b) as one f32 (CATALOG §4, seed 002). Same grid-stride shape as
// reduce.cu: each thread keeps U packs of a and b in flight, fmaf-accumulates in f32, the block
// reduces with block_reduce_sum and adds into y (zeroed first on the same stream) with one atomic.
// Any n: scalar head + packs + scalar tail; when a and b are misaligned differently the N=1
// kernel runs instead (LK_PATH_FALLBACK). The seed loads float4 before its bounds check.
#include "labkit.cuh"

constexpr int kThreads = 256;

template <int N>
__device__ __forceinline__ float pack_dot(const Pack<float, N>& a, const Pack<float, N>& b, float acc) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc = fmaf(a.elem[i], b.elem[i], acc);
  return acc;
}

template <int N, int ACCESS>
__global__ void __launch_bounds__(kThreads) dot_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                                       float* __restrict__ y, lk_split s) {
  constexpr int U = N >= 4 ? 4 : 8;  // 2 x 64 (x4) or 2 x 32 (scalar) bytes in flight per thread
  __shared__ float scratch[32];
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const float* ap = a + s.head;
  const float* bp = b + s.head;
  float acc = 0.f;
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // U whole packs, all in bounds
    Pack<float, N> ra[U], rb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      lk_load<ACCESS>(ra[u], ap + (p + u * stride) * N);
      lk_load<ACCESS>(rb[u], bp + (p + u * stride) * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc = pack_dot(ra[u], rb[u], acc);
  }
  for (; p < s.packs; p += stride) {
    Pack<float, N> ra, rb;
    lk_load<ACCESS>(ra, ap + p * N);
    lk_load<ACCESS>(rb, bp + p * N);
    acc = pack_dot(ra, rb, acc);
  }
  // scalar edges: head + tail < 2N
  for (int64_t j = t; j < s.head + s.tail; j += stride) {
    const int64_t i = lk_edge_index(s, N, j);
    acc = fmaf(a[i], b[i], acc);
  }
  acc = block_reduce_sum<kThreads>(acc, scratch);
  if (threadIdx.x == 0) atomicAdd(y, acc);
}

template <int N, int ACCESS>
static int launch_dot(const lk_args* args, cudaStream_t stream) {
  const float* a = lk_ptr<const float>(args->t[0]);
  const float* b = lk_ptr<const float>(args->t[1]);
  float* y = lk_ptr<float>(args->t[2]);
  const int64_t n = args->t[0].numel;
  const void* ptrs[2] = {a, b};
  const lk_split s = lk_make_split(n, N, sizeof(float), ptrs, 2);
  const int64_t cap = resident_blocks(kThreads);
  cudaMemsetAsync(y, 0, sizeof(float), stream);  // the blocks accumulate into y
  if (!s.vector) {  // a and b misaligned differently: packs of one float need no alignment
    const lk_split scalar = lk_make_split(n, 1, sizeof(float), ptrs, 2);
    const int64_t blocks = ceil_div<int64_t>(n, kThreads);
    dot_kernel<1, 4><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(a, b, y, scalar);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, kThreads);
  dot_kernel<N, ACCESS><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(a, b, y, s);
  return lk_launch_status();
}

// The exported launchers (`int dot_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/dot.py (labkit.build.export_source): `labkit list` prints them.
