// Histogram of int32 values into `bins` int32 counts (CATALOG §4, seed 002). bins = numel of the
// output; values outside [0, bins) are skipped (never counted, never written out of bounds).
// The counts are zeroed on the launch stream first, since every variant accumulates with atomics.
// histogram_kernel<N, ACCESS>: the seed's, one global atomicAdd per element (N=4: one int4 load);
// histogram_smem_kernel: privatized, grid-stride int4 loads into per-warp-group shared
// histograms, then one global atomic per nonzero bin per block.
// Any n and alignment: scalar head + packs + scalar tail (one input pointer is always
// splittable). i32x4_smem falls back to i32x4 (LK_PATH_FALLBACK) when one copy of the
// histogram does not fit in 48 KiB of shared memory (bins > 12288).
#include "labkit.cuh"

constexpr int kThreads = 256;      // seed-style kernels
// privatized kernel: 1024 threads, two blocks per SM. Every block flushes `bins` global atomics,
// so fewer, fatter blocks flush less: on an H100 at 2^26 values, 4096 bins, 1024 x 2 per SM took
// 93.8 us where 512 x 4 per SM took 97.2 (the 16-byte copy of the same bytes: 91.6)
constexpr int kSmemThreads = 1024;
constexpr int kSmemInts = 48 * 1024 / 4;     // most one copy may take (default limit)
constexpr int kCopiesInts = 32 * 1024 / 4;   // budget for the copies of one block

__device__ __forceinline__ void count(int* h, int v, int bins) {
  if (static_cast<unsigned>(v) < static_cast<unsigned>(bins)) atomicAdd(h + v, 1);  // also rejects v < 0
}

template <int N, int ACCESS>
__global__ void histogram_kernel(const int* __restrict__ x, int* __restrict__ hist, int bins, lk_split s) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < s.packs) {
    Pack<int, N> r;
    lk_load<ACCESS>(r, x + s.head + t * N);
#pragma unroll
    for (int i = 0; i < N; ++i) count(hist, r.elem[i], bins);
  }
  if (t < s.head + s.tail) count(hist, x[lk_edge_index(s, N, t)], bins);  // scalar edges
}

// copies x bins ints of dynamic shared memory: warp w counts into copy w % copies, so fewer
// threads collide on the same shared address when bins is small.
template <int N, int ACCESS, int THREADS>
__global__ void __launch_bounds__(THREADS) histogram_smem_kernel(const int* __restrict__ x,
                                                                 int* __restrict__ hist, int bins,
                                                                 int copies, lk_split s) {
  constexpr int U = 4;  // int4 loads in flight per thread
  extern __shared__ int sh[];
  for (int i = threadIdx.x; i < copies * bins; i += THREADS) sh[i] = 0;
  __syncthreads();
  int* mine = sh + (threadIdx.x / LK_WARP) % copies * bins;
  const int64_t t = int64_t(blockIdx.x) * THREADS + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * THREADS;
  const int* xp = x + s.head;
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // U whole packs, all in bounds
    Pack<int, N> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<ACCESS>(r[u], xp + (p + u * stride) * N);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < N; ++i) count(mine, r[u].elem[i], bins);
  }
  for (; p < s.packs; p += stride) {
    Pack<int, N> r;
    lk_load<ACCESS>(r, xp + p * N);
#pragma unroll
    for (int i = 0; i < N; ++i) count(mine, r.elem[i], bins);
  }
  if (t < s.head + s.tail) count(mine, x[lk_edge_index(s, N, t)], bins);  // scalar edges
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += THREADS) {  // merge the copies, flush to global
    int c = 0;
    for (int k = 0; k < copies; ++k) c += sh[k * bins + b];
    if (c) atomicAdd(hist + b, c);
  }
}

template <int N, int ACCESS>
static int launch_histogram(const lk_args* args, cudaStream_t stream) {
  const int* x = lk_ptr<const int>(args->t[0]);
  int* hist = lk_ptr<int>(args->t[1]);
  const int64_t n = args->t[0].numel;
  const int bins = int(args->t[1].numel);
  const void* ptrs[1] = {x};
  const lk_split s = lk_make_split(n, N, sizeof(int), ptrs, 1);
  cudaMemsetAsync(hist, 0, sizeof(int) * bins, stream);  // the kernels accumulate into hist
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  histogram_kernel<N, ACCESS><<<ceil_div<int64_t>(work > 0 ? work : 1, kThreads), kThreads, 0, stream>>>(
      x, hist, bins, s);
  return lk_launch_status();
}

static int launch_histogram_smem(const lk_args* args, cudaStream_t stream) {
  constexpr int N = 4;
  if (args->t[1].numel > kSmemInts) {  // one shared copy would not fit: global atomics instead
    const int rc = launch_histogram<N, 16>(args, stream);
    return rc < 0 ? rc : LK_PATH_FALLBACK;
  }
  const int* x = lk_ptr<const int>(args->t[0]);
  int* hist = lk_ptr<int>(args->t[1]);
  const int64_t n = args->t[0].numel;
  const int bins = int(args->t[1].numel);
  const void* ptrs[1] = {x};
  const lk_split s = lk_make_split(n, N, sizeof(int), ptrs, 1);
  constexpr int warps = kSmemThreads / LK_WARP;
  const int fit = kCopiesInts / bins > 1 ? kCopiesInts / bins : 1;
  const int copies = fit < warps ? fit : warps;
  const int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, kSmemThreads);
  const int64_t cap = resident_blocks(kSmemThreads);
  cudaMemsetAsync(hist, 0, sizeof(int) * bins, stream);  // blocks add their counts into hist
  histogram_smem_kernel<N, 16, kSmemThreads><<<int(blocks < cap ? blocks : cap), kSmemThreads,
                                 sizeof(int) * copies * bins, stream>>>(x, hist, bins, copies, s);
  return lk_launch_status();
}

// The exported launchers (`int histogram_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/histogram.py (labkit.build.export_source): `labkit list` prints them.
