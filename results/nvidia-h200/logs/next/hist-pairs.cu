// Issue 25, histogram i32 at 4096 bins and 2^24 values (64 MiB): the flush of every SM's counts (132 x
// bins global atomics, ~2.5 us) is the L2's atomic work. Does adding two neighbouring bins in one 64-bit
// atomic (atom.add.u64 on the pair: the low count cannot carry into the high one while a bin's total stays
// below 2^32, i.e. for fewer than 2^32 values) halve it? The shipped histogram_sm_kernel (kernels/
// histogram.cu, included) against the same kernel with the pair flush, and with no flush (count only,
// a wrong result: the loop's own time), and both again with two 1024-thread blocks per SM (twice the
// loads in flight, twice the flush). Each with its programmatic zeroing kernel, as launch_histogram_sm
// does; 4 input sets and 4 outputs rotated, 30 launches between two events, modes interleaved, median of
// 9 rounds. Every output of the flushing modes checked against a host histogram (values in [-64, bins + 64)).
// nvcc -O3 -arch=sm_90 -std=c++17 -I kernels hist-pairs.cu -o hist-pairs
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "histogram.cu"
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
constexpr int SETS = 4, LAUNCHES = 30, ROUNDS = 9, UU = 4;

// MODE 1: the pair flush; MODE 2: no flush; MODE 0: the shipped flush. The count loop is
// histogram_sm_kernel's, written the same; BPS blocks per SM (each its own copies and flush).
template <int MODE, int BPS = 1>
__global__ void __launch_bounds__(kSmThreads, BPS) hist_v(const int* __restrict__ x, int* __restrict__ hist, int bins,
                                                        int log_copies, lk_split s) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;
  for (int i = threadIdx.x; i < copies * bins; i += kSmThreads) shc[i] = 0;
  __syncthreads();
  const uint32_t mine = uint32_t(__cvta_generic_to_shared(shc + threadIdx.x % copies));
  const int64_t t = int64_t(blockIdx.x) * kSmThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kSmThreads;
  const int* xp = x + s.head;
  int64_t p = t;
  for (; p + (UU - 1) * stride < s.packs; p += UU * stride) {
    Pack<int, 4> r[UU];
#pragma unroll
    for (int u = 0; u < UU; ++u) lk_load<16>(r[u], xp + (p + u * stride) * 4);
#pragma unroll
    for (int u = 0; u < UU; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) count_at(mine, r[u].elem[i], bins, shift);
  }
  if (p < s.packs) {
    Pack<int, 4> r[UU];
#pragma unroll
    for (int u = 0; u < UU; ++u) lk_load<16>(r[u], xp + (p + u * stride < s.packs ? p + u * stride : p) * 4);
#pragma unroll
    for (int u = 0; u < UU; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) count_at(mine, p + u * stride < s.packs ? r[u].elem[i] : -1, bins, shift);
  }
  if (t < s.head + s.tail) count_at(mine, x[lk_edge_index(s, 4, t)], bins, shift);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __syncthreads();
  if (MODE == 2) return;
  const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~(LK_WARP - 1);
  const int rot = int(threadIdx.x % LK_WARP) * copies / LK_WARP;
  if (MODE == 0) {
    for (int k = threadIdx.x; k < bins; k += kSmThreads) {
      const int b = k + start < bins ? k + start : k + start - bins;
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + ((j + rot) & (copies - 1))];
      if (c) atomicAdd(hist + b, c);
    }
    return;
  }
  // the shipped read of the copies (bin k + start in thread k); the odd lane hands its count to the even
  // one, which adds both with one 64-bit atomic (bins a multiple of 32 here: every lane takes each step)
  for (int k = threadIdx.x; k < bins; k += kSmThreads) {
    const int b = k + start < bins ? k + start : k + start - bins;
    unsigned c = 0;
    for (int j = 0; j < copies; ++j) c += shc[b * copies + ((j + rot) & (copies - 1))];
    const unsigned hi = __shfl_down_sync(~0u, c, 1);
    if (!(threadIdx.x & 1) && (c | hi)) atomicAdd(reinterpret_cast<unsigned long long*>(hist + b), (uint64_t(hi) << 32) | c);
  }
}

typedef void (*KF)(const int*, int*, int, int, lk_split);

static void launch(KF k, const int* x, int* hist, int64_t n, int bins, cudaStream_t st, int bps) {
  const int64_t one = 4LL * bins;
  int log_copies = 0;
  while ((1 << log_copies) < LK_WARP && (2 << log_copies) * one <= (96LL << 10)) ++log_copies;
  const lk_split s = hist_split(x, n, 4);
  const int smem = int(one << log_copies);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int64_t blocks = std::min<int64_t>(ceil_div<int64_t>(s.packs, int64_t(kSmThreads) * UU), bps * lk_sm_count());
  histogram_zero<<<std::min(ceil_div(bins, 1024), 8), 1024, 0, st>>>(hist, bins);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kSmThreads);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, x, hist, bins, log_copies, s));
}

int main() {
  constexpr int M = 5;
  const KF ks[M] = {histogram_sm_kernel<UU>, hist_v<1>, hist_v<2>, hist_v<0, 2>, hist_v<2, 2>};
  const int bps[M] = {1, 1, 1, 2, 2};
  const char* names[M] = {"shipped flush (u32 a bin)", "pair flush (u64 two bins)", "no flush (count only)",
                          "2 blocks/SM, shipped flush", "2 blocks/SM, no flush"};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, %d launches a sample, %d sets, median of %d rounds\n", prop.name, prop.multiProcessorCount,
         LAUNCHES, SETS, ROUNDS);
  int wrong = 0;
  for (auto [n, bins] : {std::pair<int64_t, int>{1 << 24, 4096}, {1 << 24, 16384}, {1 << 24, 1024}, {1 << 26, 4096}}) {
    std::vector<int> h(n), want(bins, 0);
    srand(7);
    for (auto& v : h) { v = rand() % (bins + 128) - 64; if (v >= 0 && v < bins) ++want[v]; }
    int *x[SETS], *hist[SETS];
    for (int i = 0; i < SETS; ++i) {
      CK(cudaMalloc(&x[i], n * 4));
      CK(cudaMemcpy(x[i], h.data(), n * 4, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&hist[i], bins * 4));
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t[M];
    for (int r = 0; r <= ROUNDS; ++r)
      for (int m = 0; m < M; ++m) {
        for (auto p : hist) CK(cudaMemset(p, 0xa5, bins * 4));
        CK(cudaEventRecord(e0));
        for (int l = 0; l < LAUNCHES; ++l) launch(ks[m], x[l % SETS], hist[l % SETS], n, bins, 0, bps[m]);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r) t[m].push_back(ms * 1000.f / LAUNCHES);
        if (m == 2 || m == 4) continue;
        std::vector<int> got(bins);
        for (int sI = 0; sI < SETS; ++sI) {
          CK(cudaMemcpy(got.data(), hist[sI], bins * 4, cudaMemcpyDeviceToHost));
          if (got != want && wrong++ < 5) printf("  WRONG: %s, set %d\n", names[m], sI);
        }
      }
    printf("2^%d values (%lld MiB), %d bins:\n", __builtin_ctzll(n), (long long)(n * 4 >> 20), bins);
    for (int m = 0; m < M; ++m) {
      std::sort(t[m].begin(), t[m].end());
      const float med = t[m][ROUNDS / 2];
      printf("  %-27s %8.2f us  %6.0f GB/s  (min %.2f, max %.2f)\n", names[m], med, (n + bins) * 4 / med / 1e3,
             t[m].front(), t[m].back());
    }
    for (int i = 0; i < SETS; ++i) { CK(cudaFree(x[i])); CK(cudaFree(hist[i])); }
  }
  printf("%d wrong outputs\n", wrong);
  return wrong != 0;
}
