// Dot product, y = sum(a * b) as one f32 (CATALOG §4, seed 002).
//   f32          dot_kernel<1, 4>: one float of a and b per load
//   f32x4        dot_kernel<4, 16>: one float4 of a and b per load
//   f32x4_1pass  dot_1pass<4, 2>: one launch, no atomics (as reduce.cu's reduce_sum_1pass)
// dot_kernel: the grid-stride shape of reduce.cu: each thread keeps U packs of a and b in flight,
// fmaf-accumulates in f32, the block reduces with block_reduce_sum and adds into y (zeroed first
// on the same stream) with one atomic. dot_1pass: a grid counted from its occupancy, whole rounds
// of loads (the last one clamped, not a loop of single loads), the last block adds the blocks'
// partial sums (lk_grid.cuh): no memset launch before it.
// Any n: scalar head + packs + scalar tail; when a and b are misaligned differently the N=1
// kernel runs instead (LK_PATH_FALLBACK). The seed loads float4 before its bounds check.
#include "labkit.cuh"
#include "lk_grid.cuh"

constexpr int kThreads = 256;
// one-pass kernels: 1024-thread blocks, 2 per SM (264 on 132 SMs): every block's ticket is an atomic
// on one address at the end of the kernel, where they queue; 1056 blocks of 256 queued 4x longer
constexpr int kOnePassThreads = 1024;

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

// One launch: U packs of a and of b per thread per round, all 2U loads issued before the first
// fmaf; the last, partial round loads clamped indices and zeroes the extra packs' bits (guarded
// loads or adds let nvcc wait for each load in turn: reduce.cu).
template <int N>
__device__ __forceinline__ void keep_if(Pack<float, N>& r, bool keep) {
  uint32_t* bits = reinterpret_cast<uint32_t*>(&r);
#pragma unroll
  for (int k = 0; k < N; ++k) bits[k] &= keep ? ~0u : 0u;
}

// blocks per SM the one-pass kernel is compiled for: 2 (32 registers) while the 2 x FLOATS fit
template <int FLOATS> constexpr int kOnePassBlocks = FLOATS <= 8 ? 2048 / kOnePassThreads : 1024 / kOnePassThreads;

template <int N, int U>
__global__ void __launch_bounds__(kOnePassThreads, kOnePassBlocks<N * U>) dot_1pass(const float* __restrict__ a,
                                                                     const float* __restrict__ b, float* __restrict__ y,
                                                                     int slot, lk_split s) {
  __shared__ float scratch[32];
  const int64_t t = int64_t(blockIdx.x) * kOnePassThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kOnePassThreads;
  const float* ap = a + s.head;
  const float* bp = b + s.head;
  float acc[2] = {0.f, 0.f};
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // whole rounds
    Pack<float, N> ra[U], rb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      lk_load<4 * N>(ra[u], ap + (p + u * stride) * N);
      lk_load<4 * N>(rb[u], bp + (p + u * stride) * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u % 2] = pack_dot(ra[u], rb[u], acc[u % 2]);
  }
  if (p < s.packs) {  // the last round
    Pack<float, N> ra[U], rb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t q = p + u * stride < s.packs ? p + u * stride : p;
      lk_load<4 * N>(ra[u], ap + q * N);
      lk_load<4 * N>(rb[u], bp + q * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      keep_if(ra[u], p + u * stride < s.packs);  // both: 0 * an infinite b would be NaN
      keep_if(rb[u], p + u * stride < s.packs);
      acc[u % 2] = pack_dot(ra[u], rb[u], acc[u % 2]);
    }
  }
  for (int64_t j = t; j < s.head + s.tail; j += stride) {  // scalar edges: head + tail < 2N
    const int64_t i = lk_edge_index(s, N, j);
    acc[0] = fmaf(a[i], b[i], acc[0]);
  }
  const float block_sum = block_reduce_sum<kOnePassThreads>(acc[0] + acc[1], scratch);
  float total;
  if (lk_last_block_sum<kOnePassThreads>(block_sum, slot, scratch, total) && threadIdx.x == 0) *y = total;
}

// What every dot launcher reads from its arguments: t[0] = a, t[1] = b (n floats each), t[2] = y.
struct DotArgs {
  const float* a;
  const float* b;
  float* y;
  int64_t n;
  explicit DotArgs(const lk_args* args)
      : a(lk_ptr<const float>(args->t[0])), b(lk_ptr<const float>(args->t[1])), y(lk_ptr<float>(args->t[2])),
        n(args->t[0].numel) {}
  lk_split split(int N) const {  // packs of N floats in both a and b
    const void* ptrs[2] = {a, b};
    return lk_make_split(n, N, sizeof(float), ptrs, 2);
  }
};

template <int N, int ACCESS>
static int launch_dot(const lk_args* args, cudaStream_t stream) {
  const DotArgs d(args);
  const lk_split s = d.split(N);
  const int64_t cap = resident_blocks(kThreads);
  cudaMemsetAsync(d.y, 0, sizeof(float), stream);  // the blocks accumulate into y
  if (!s.vector) {  // a and b misaligned differently: packs of one float need no alignment
    const int64_t blocks = ceil_div<int64_t>(d.n, kThreads);
    dot_kernel<1, 4><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(d.a, d.b, d.y, d.split(1));
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, kThreads);
  dot_kernel<N, ACCESS><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(d.a, d.b, d.y, s);
  return lk_launch_status();
}

// The grid: no more blocks than full rounds of work, at most what the GPU holds at once (and the
// partial sums' slots, lk_grid.cuh).
template <int N, int U>
static int launch_dot_1pass_grid(const float* a, const float* b, float* y, lk_split s, cudaStream_t stream) {
  int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, int64_t(kOnePassThreads) * U);
  const int64_t cap = lk_resident_grid<dot_1pass<N, U>>(kOnePassThreads);
  blocks = blocks < cap ? blocks : cap;
  blocks = blocks < LK_GRID_BLOCKS ? blocks : LK_GRID_BLOCKS;
  dot_1pass<N, U><<<int(blocks), kOnePassThreads, 0, stream>>>(a, b, y, lk_grid_slot(stream), s);
  return lk_launch_status();
}

template <int N, int U>
static int launch_dot_1pass(const lk_args* args, cudaStream_t stream) {
  const DotArgs d(args);
  const lk_split s = d.split(N);
  if (!s.vector) {  // a and b misaligned differently: packs of one float, 4U loads of each per round
    const int rc = launch_dot_1pass_grid<1, 4 * U>(d.a, d.b, d.y, d.split(1), stream);
    return rc < 0 ? rc : LK_PATH_FALLBACK;
  }
  return launch_dot_1pass_grid<N, U>(d.a, d.b, d.y, s, stream);
}

// The exported launchers (`int dot_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/dot.py (labkit.build.export_source): `labkit list` prints them.
