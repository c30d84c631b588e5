// Histogram of int32 values into `bins` int32 counts (CATALOG §4, seed 002). bins = numel of the
// output; values outside [0, bins) are skipped (never counted, never written out of bounds).
// The counts are zeroed on the launch stream first, since every variant accumulates with atomics.
//   i32          histogram_kernel<1, 4>: the seed's, one global atomicAdd per element
//   i32x4        histogram_kernel<4, 16>: one int4 load per thread, four global atomics
//   i32x4_smem   histogram_smem_kernel: privatized, grid-stride int4 loads into per-warp-group
//                shared histograms, then one global atomic per nonzero bin per block
//   i32x4_sm     histogram_sm_kernel: one 1024-thread block per SM, interleaved shared copies,
//                the counts zeroed by a kernel it overlaps (a programmatic launch) instead of a
//                memset
// What held i32x4_smem below the copy peak at 4096 bins and more: every block flushes all bins
// with global atomics, 2 blocks per SM and all starting at bin 0 (264 blocks on the same lines at
// once), and above 12288 bins one copy no longer fits its 48 KiB, so it ran the global-atomic
// kernel (a few % of the peak). histogram_sm_kernel flushes once per SM, each block starting at
// its own bin, and keeps up to ~56 K bins in (opted-in) shared memory; lane l counts into copy
// l % C of C copies laid out bin-major (bin b of copy c at b * C + c), so lanes that draw the same
// bank's word in one copy land on different banks, and equal bins never share an address.
// Its flush, 132 x bins adds into global memory (~2.5 us at 4096 bins on an H100), is the L2's work:
// 4-16 replicas, DSMEM clusters, a grid barrier with per-slice sums, TMA bulk reductions and two bins
// per 64-bit atomic were no faster (logs/3d7987d16a9d/hist-coop.log, logs/09a24f4b6d0d/hist-flush-tma.log,
// H200 logs/cafd5d71b8c1/call5/hist-pairs.log).
// Where the counts sit matters to the global-atomic kernels (i32, i32x4, and torch's index_add_):
// 256 counts (1 KiB) starting on a 1 KiB boundary took 4.33 ms for 2^24 values, straddling two
// 1 KiB blocks 2.08 ms, on both GPUs (16 counts: 3.11 ms anywhere), as if each 1 KiB block were
// served by one L2 unit. A buffer's place is the allocator's, so these rows can move by 2x between
// processes (logs/8f3709c0c950/atomic-place.log).
// Any n and alignment: scalar head + packs + scalar tail (one input pointer is always
// splittable). i32x4_smem falls back to i32x4 (LK_PATH_FALLBACK) when one copy of the
// histogram does not fit in 48 KiB of shared memory (bins > 12288); i32x4_sm when one copy does
// not fit in what a block may opt in to (bins > ~56 K on sm_90).
#include "labkit.cuh"

constexpr int kThreads = 256;      // seed-style kernels
// privatized kernel: 1024 threads, two blocks per SM. Every block flushes `bins` global atomics,
// so fewer, fatter blocks flush less: on an H100 at 2^26 values, 4096 bins, 1024 x 2 per SM took
// 93.8 us where 512 x 4 per SM took 97.2 (the 16-byte copy of the same bytes: 91.6)
constexpr int kSmemThreads = 1024;
constexpr int kSmemInts = 48 * 1024 / 4;     // most one copy may take (default limit)
constexpr int kCopiesInts = 32 * 1024 / 4;   // budget for the copies of one block
constexpr int kSmThreads = 1024;           // histogram_sm_kernel: one block per SM

__device__ __forceinline__ void count(int* h, int v, int bins) {
  if (static_cast<unsigned>(v) < static_cast<unsigned>(bins)) atomicAdd(h + v, 1);  // also rejects v < 0
}

// One count into interleaved copies, without a branch: red.shared adds `in` (1, or 0 for a value
// outside [0, bins), at the copy's first word) at shared byte address base + (v << shift): ~5
// instructions. Written as `if (in) atomicAdd(...)`, each count compiled to a branch around the
// atomic that recomputed the shared window's base (S2UR), ~10 instructions per value; a
// predicated red.shared became such a branch too.
__device__ __forceinline__ void count_at(uint32_t base, int v, int bins, int shift) {
  const bool in = static_cast<unsigned>(v) < static_cast<unsigned>(bins);
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(base + (uint32_t(in ? v : 0) << shift)), "r"(uint32_t(in))
               : "memory");
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

// One block per SM (persistent, grid-stride): whole rounds of U int4 loads issued before any count,
// the last round's indices clamped and its extra values turned into -1 (skipped), since a guarded
// count let nvcc sink the load into the guard (reduce.cu). After the count the block waits for the
// zeroing kernel (griddepcontrol.wait: the launch is programmatic, see launch_histogram_sm) and
// flushes its bins starting at its own place in the histogram, a multiple of 32 bins: a warp adds
// one 128-byte line, and the blocks' lines differ at each moment. (Loading round k+1 while round k
// is counted was no faster: H200 2^26 values, 4096 bins, 65.6 us either way, H200 logs/2eca58132fdf.)
template <int U>
__global__ void __launch_bounds__(kSmThreads, 1) histogram_sm_kernel(const int* __restrict__ x, int* __restrict__ hist,
                                                                     int bins, int log_copies, lk_split s) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;  // bin b of a copy at byte b << shift
  for (int i = threadIdx.x; i < copies * bins; i += kSmThreads) shc[i] = 0;
  __syncthreads();
  const uint32_t mine = uint32_t(__cvta_generic_to_shared(shc + threadIdx.x % copies));  // copy = lane % copies
  const int64_t t = int64_t(blockIdx.x) * kSmThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kSmThreads;
  const int* xp = x + s.head;
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // whole rounds
    Pack<int, 4> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<16>(r[u], xp + (p + u * stride) * 4);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) count_at(mine, r[u].elem[i], bins, shift);
  }
  if (p < s.packs) {  // the last round
    Pack<int, 4> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<16>(r[u], xp + (p + u * stride < s.packs ? p + u * stride : p) * 4);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) count_at(mine, p + u * stride < s.packs ? r[u].elem[i] : -1, bins, shift);
  }
  if (t < s.head + s.tail) count_at(mine, x[lk_edge_index(s, 4, t)], bins, shift);  // scalar edges
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // hist zeroed (a no-op in a plain launch)
#endif
  __syncthreads();
  const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~(LK_WARP - 1);
  // a warp's 32 bins span `copies` rows of 32 banks: lanes of row r start at copy r, so the warp's reads
  // of one step hit 32 banks (all at copy j: a copies-way conflict, 32-way at 256 bins, which took 4 of the
  // flush's 5 us at 2^24 values; logs/3d7987d16a9d/hist-flush.log)
  const int rot = int(threadIdx.x % LK_WARP) * copies / LK_WARP;
  for (int k = threadIdx.x; k < bins; k += kSmThreads) {
    const int b = k + start < bins ? k + start : k + start - bins;
    int c = 0;
    for (int j = 0; j < copies; ++j) c += shc[b * copies + ((j + rot) & (copies - 1))];
    if (c) atomicAdd(hist + b, c);
  }
}

// Zeroes the counts for histogram_sm_kernel, which is launched programmatically after it: the
// trigger at the top lets that grid start loading and counting at once, and only its flush waits
// for this grid. A memset node in its place cost ~2 us of the GPU's launch gap inside the timed
// region (2^26 values, 4096 bins: H100 93.8 -> 91.9 us, H200 67.4 -> 65.7 us; logs/599db95bf2cf,
// logs/2eca58132fdf).
__global__ void histogram_zero(int* __restrict__ hist, int bins) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < bins; i += gridDim.x * blockDim.x) hist[i] = 0;
}

// What every histogram launcher reads from its arguments: t[0] = x (n values), t[1] = the bins counts.
struct HistArgs {
  const int* x;
  int* hist;
  int64_t n;
  int bins;
  explicit HistArgs(const lk_args* args)
      : x(lk_ptr<const int>(args->t[0])), hist(lk_ptr<int>(args->t[1])), n(args->t[0].numel),
        bins(int(args->t[1].numel)) {}
};

static lk_split hist_split(const int* x, int64_t n, int N) {  // x: scalar head | packs of N | scalar tail
  const void* ptrs[1] = {x};
  return lk_make_split(n, N, sizeof(int), ptrs, 1);
}

template <int N, int ACCESS>
static int launch_histogram(const lk_args* args, cudaStream_t stream) {
  const auto [x, hist, n, bins] = HistArgs(args);
  const lk_split s = hist_split(x, n, N);
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
  const auto [x, hist, n, bins] = HistArgs(args);
  const lk_split s = hist_split(x, n, N);
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

// C = the largest power of two <= 32 copies within SMEM_KB KiB (at least one copy, in what a block
// may opt in to), one block per SM. Kept under ~100 KiB: the rest of the SM's 256 KiB is L1,
// where the loads in flight per SM land (1024 threads x U x 16 B: 64 KiB at the default U = 4).
template <int U, int SMEM_KB>
static int launch_histogram_sm(const lk_args* args, cudaStream_t stream) {
  const auto [x, hist, n, bins] = HistArgs(args);
  const int64_t one = int64_t(sizeof(int)) * bins;
  if (one > lk_smem_optin() - 1024) {  // one copy would not fit: global atomics instead
    const int rc = launch_histogram<4, 16>(args, stream);
    return rc < 0 ? rc : LK_PATH_FALLBACK;
  }
  int log_copies = 0;  // copies = 2^log_copies
  while ((1 << log_copies) < LK_WARP && (2 << log_copies) * one <= (int64_t(SMEM_KB) << 10)) ++log_copies;
  const lk_split s = hist_split(x, n, 4);
  const int smem = int(one << log_copies);
  if (smem > (48 << 10))
    cudaFuncSetAttribute(histogram_sm_kernel<U>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, int64_t(kSmThreads) * U);
  blocks = blocks < lk_sm_count() ? blocks : lk_sm_count();
  histogram_zero<<<ceil_div(bins, 1024) < 8 ? ceil_div(bins, 1024) : 8, 1024, 0, stream>>>(hist, bins);
  // a programmatic launch (sm_90+): the kernel may start before histogram_zero ends, and waits for it
  // only before its flush (griddepcontrol.wait); older GPUs get a plain launch after it
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kSmThreads);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = lk_cc_major() >= 9 ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, histogram_sm_kernel<U>, x, hist, bins, log_copies, s);
  return err == cudaSuccess ? lk_launch_status() : -static_cast<int>(err);
}

// The exported launchers (`int histogram_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/histogram.py (labkit.build.export_source): `labkit list` prints them.
