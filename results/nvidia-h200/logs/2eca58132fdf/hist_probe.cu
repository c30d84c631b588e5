// Histogram 4096 bins, 2^26 int32, cold (read flush): where does the time go?
// Leave-one-out: no count, no flush, no memset; and a cluster (DSMEM) flush with C = 2, 4.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace cg = cooperative_groups;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
constexpr int T = 1024;

__device__ __forceinline__ void count_at(uint32_t base, int v, int bins, int shift) {
  const bool in = static_cast<unsigned>(v) < static_cast<unsigned>(bins);
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(base + (uint32_t(in ? v : 0) << shift)), "r"(uint32_t(in)) : "memory");
}

// COUNT 0: xor the values (a read-only kernel of the same shape); FLUSH 0 none, 1 global atomics, 2 cluster
template <int U, int COUNT, int FLUSH>
__global__ void __launch_bounds__(T, 1) hist(const int4* __restrict__ x, int* __restrict__ hist, int bins, int log_copies,
                                             int64_t packs, int* sink) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;
  for (int i = threadIdx.x; i < copies * bins; i += T) shc[i] = 0;
  __syncthreads();
  const uint32_t mine = uint32_t(__cvta_generic_to_shared(shc + threadIdx.x % copies));
  const int64_t t = int64_t(blockIdx.x) * T + threadIdx.x, stride = int64_t(gridDim.x) * T;
  int acc = 0;
  int64_t p = t;
  for (; p + (U - 1) * stride < packs; p += U * stride) {
    int4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = __ldg(x + p + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (COUNT) {
        count_at(mine, r[u].x, bins, shift); count_at(mine, r[u].y, bins, shift);
        count_at(mine, r[u].z, bins, shift); count_at(mine, r[u].w, bins, shift);
      } else acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
    }
  }
  for (; p < packs; p += stride) {
    int4 r = __ldg(x + p);
    if (COUNT) { count_at(mine, r.x, bins, shift); count_at(mine, r.y, bins, shift); count_at(mine, r.z, bins, shift); count_at(mine, r.w, bins, shift); }
    else acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  if (!COUNT && acc == 0x7fffffff) sink[0] = acc;
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // no-op without a programmatic launch
#endif
  if (FLUSH == 3) {  // bins (2k, 2k+1) as one 64-bit add (hist 8-byte aligned, counts < 2^32)
    __syncthreads();
    const int pairs = bins / 2;
    const int start = int(int64_t(blockIdx.x) * pairs / gridDim.x) & ~31;
    unsigned long long* h2 = reinterpret_cast<unsigned long long*>(hist);
    for (int k = threadIdx.x; k < pairs; k += T) {
      const int q = k + start < pairs ? k + start : k + start - pairs;
      unsigned c0 = 0, c1 = 0;
      for (int j = 0; j < copies; ++j) c0 += shc[(2 * q) * copies + j], c1 += shc[(2 * q + 1) * copies + j];
      if (c0 | c1) atomicAdd(h2 + q, (unsigned long long)c0 | ((unsigned long long)c1 << 32));
    }
  } else if (FLUSH == 1) {
    __syncthreads();
    const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
    for (int k = threadIdx.x; k < bins; k += T) {
      const int b = k + start < bins ? k + start : k + start - bins;
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
      if (c) atomicAdd(hist + b, c);
    }
  } else if (FLUSH == 2) {
#if __CUDA_ARCH__ >= 900
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const int C = int(cl.num_blocks()), r = int(cl.block_rank());
    const int lo = int(int64_t(r) * bins / C), hi = int(int64_t(r + 1) * bins / C);
    const int nclus = gridDim.x / C, ci = blockIdx.x / C;
    const int span = hi - lo, start = int(int64_t(ci) * span / nclus) & ~31;
    for (int k = threadIdx.x; k < span; k += T) {
      const int b = lo + (k + start < span ? k + start : k + start - span);
      int c = 0;
      for (int q = 0; q < C; ++q) {
        const int* other = cl.map_shared_rank(shc, q);
        for (int j = 0; j < copies; ++j) c += other[b * copies + j];
      }
      if (c) atomicAdd(hist + b, c);
    }
    cl.sync();
#endif
  } else if (COUNT) {
    __syncthreads();
    if (shc[threadIdx.x] == 0x7fffffff) sink[1] = 1;
  }
}

__global__ void flush_read(const int4* __restrict__ b, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int4 v = b[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) sink[2] = acc;
}

template <int U>
__device__ __forceinline__ void load_round(int4 (&r)[U], const int4* __restrict__ x, int64_t q, int64_t stride, int64_t packs) {
#pragma unroll
  for (int u = 0; u < U; ++u) r[u] = __ldg(x + (q + u * stride < packs ? q + u * stride : q));
}
template <int U>
__device__ __forceinline__ void count_round(const int4 (&r)[U], uint32_t mine, int64_t q, int64_t stride, int64_t packs,
                                            int bins, int shift) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const bool ok = q + u * stride < packs;
    count_at(mine, ok ? r[u].x : -1, bins, shift); count_at(mine, ok ? r[u].y : -1, bins, shift);
    count_at(mine, ok ? r[u].z : -1, bins, shift); count_at(mine, ok ? r[u].w : -1, bins, shift);
  }
}
// software-pipelined: the first round's loads in flight while the copies are zeroed, round k+1 in flight while round k is counted
template <int U>
__global__ void __launch_bounds__(T, 1) hist_pipe(const int4* __restrict__ x, int* __restrict__ hist, int bins, int log_copies,
                                                  int64_t packs, int* sink) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;
  const int64_t stride = int64_t(gridDim.x) * T;
  int64_t p = int64_t(blockIdx.x) * T + threadIdx.x;
  int4 a[U], b[U];
  if (p < packs) load_round<U>(a, x, p, stride, packs);
  for (int i = threadIdx.x; i < copies * bins; i += T) shc[i] = 0;
  __syncthreads();
  const uint32_t mine = uint32_t(__cvta_generic_to_shared(shc + threadIdx.x % copies));
  while (p < packs) {
    int64_t q = p;
    p += U * stride;
    if (p < packs) load_round<U>(b, x, p, stride, packs);
    count_round<U>(a, mine, q, stride, packs, bins, shift);
    if (p >= packs) break;
    q = p;
    p += U * stride;
    if (p < packs) load_round<U>(a, x, p, stride, packs);
    count_round<U>(b, mine, q, stride, packs, bins, shift);
  }
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  __syncthreads();
  const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
  for (int k = threadIdx.x; k < bins; k += T) {
    const int bb = k + start < bins ? k + start : k + start - bins;
    int c = 0;
    for (int j = 0; j < copies; ++j) c += shc[bb * copies + j];
    if (c) atomicAdd(hist + bb, c);
  }
}

__global__ void zero_counts(int* h, int bins) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < bins; i += gridDim.x * blockDim.x) h[i] = 0;
}

__global__ void copy16(const int4* __restrict__ a, int4* __restrict__ b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) b[i] = a[i];
}

int main() {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const int64_t n = int64_t(1) << 26, packs = n / 4;
  int* x; int* h; int* sink; int4* fb; int4* cp;
  const int64_t fbn = 2LL * l2 / 16;
  CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&h, 1 << 20)); CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16));
  CK(cudaMalloc(&cp, n * 4));
  std::vector<int> hx(n);
  srand(1);
  CK(cudaMemset(fb, 0, fbn * 16));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto time = [&](auto&& launch, int reps = 40) {
    std::vector<float> v;
    for (int i = 0; i < reps + 3; ++i) {
      flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
      CK(cudaEventRecord(e0, s)); launch(); CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 3) v.push_back(ms * 1e3f);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int bins : {256, 4096, 16384}) {
    for (int64_t i = 0; i < n; ++i) hx[i] = rand() % bins;
    CK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<int> ref(bins, 0);
    for (int64_t i = 0; i < n; ++i) ref[hx[i]]++;
    const int smem_kb = 96;
    int lc = 0; const int64_t one = 4LL * bins;
    while ((1 << lc) < 32 && (2LL << lc) * one <= (int64_t(smem_kb) << 10)) ++lc;
    const int smem = int(one << lc);
    printf("bins %d copies %d smem %d KiB  sms %d\n", bins, 1 << lc, smem >> 10, sms);
    auto check = [&](const char* name) {
      std::vector<int> got(bins);
      CK(cudaMemcpy(got.data(), h, bins * 4, cudaMemcpyDeviceToHost));
      bool ok = got == ref;
      if (!ok) printf("  %-34s WRONG\n", name);
    };
#define RUN(NAME, K, GRID, MEMSET, CHECK)                                                              \
    {                                                                                                  \
      CK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));                  \
      auto go = [&] { if (MEMSET) CK(cudaMemsetAsync(h, 0, bins * 4, s)); K<<<GRID, T, smem, s>>>((const int4*)x, h, bins, lc, packs, sink); }; \
      float us = time(go);                                                                             \
      if (CHECK) { CK(cudaMemset(h, 0, bins * 4)); K<<<GRID, T, smem, s>>>((const int4*)x, h, bins, lc, packs, sink); CK(cudaStreamSynchronize(s)); check(NAME); } \
      printf("  %-34s %8.2f us  %7.1f GB/s\n", NAME, us, n * 4 / us / 1e3);                           \
    }
    RUN("count+flush+memset (shipped)", (hist<8, 1, 1>), sms, 1, 1);
    RUN("count+flush, no memset", (hist<8, 1, 1>), sms, 0, 0);
    RUN("count, no flush, no memset", (hist<8, 1, 0>), sms, 0, 0);
    RUN("read only (xor), no memset", (hist<8, 0, 0>), sms, 0, 0);
    RUN("count+flush+memset U=4", (hist<4, 1, 1>), sms, 1, 1);
    RUN("pair flush + memset", (hist<8, 1, 3>), sms, 1, 1);
    RUN("pair flush + memset U=4", (hist<4, 1, 3>), sms, 1, 1);
    for (int pair = 0; pair < 2; ++pair) for (int U : {4, 8}) {
      auto K = pair ? (U == 4 ? hist<4, 1, 3> : hist<8, 1, 3>) : (U == 4 ? hist<4, 1, 1> : hist<8, 1, 1>);
      CK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
      cfg.gridDim = dim3(sms);
      auto go = [&] { zero_counts<<<1, 1024, 0, s>>>(h, bins); CK(cudaLaunchKernelEx(&cfg, K, (const int4*)x, h, bins, lc, packs, sink)); };
      float us = time(go);
      CK(cudaMemset(h, 0x55, bins * 4)); go(); CK(cudaStreamSynchronize(s));
      char name[64]; snprintf(name, 64, "PDL zero kernel, %s flush U=%d", pair ? "pair" : "32-bit", U);
      check(name);
      printf("  %-34s %8.2f us  %7.1f GB/s\n", name, us, n * 4 / us / 1e3);
    }
    for (int U : {2, 4}) {
      auto K = U == 2 ? hist_pipe<2> : hist_pipe<4>;
      CK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
      cfg.gridDim = dim3(sms);
      auto go = [&] { zero_counts<<<1, 1024, 0, s>>>(h, bins); CK(cudaLaunchKernelEx(&cfg, K, (const int4*)x, h, bins, lc, packs, sink)); };
      float us = time(go);
      CK(cudaMemset(h, 0x55, bins * 4)); go(); CK(cudaStreamSynchronize(s));
      char name[64]; snprintf(name, 64, "PDL pipelined U=%d", U);
      check(name);
      printf("  %-34s %8.2f us  %7.1f GB/s\n", name, us, n * 4 / us / 1e3);
    }
    // the same in a CUDA graph (captured programmatic edge), one replay per sample
    {
      auto K = hist<4, 1, 3>;
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
      cfg.gridDim = dim3(sms);
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < 10; ++r) { zero_counts<<<1, 1024, 0, s>>>(h, bins); CK(cudaLaunchKernelEx(&cfg, K, (const int4*)x, h, bins, lc, packs, sink)); }
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      float us = time([&] { CK(cudaGraphLaunch(ge, s)); }) / 10;
      CK(cudaMemset(h, 0x55, bins * 4)); CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s));
      check("graph of 10 PDL pair U=4");
      printf("  %-34s %8.2f us  %7.1f GB/s (per launch, back to back)\n", "graph of 10 PDL pair U=4", us, n * 4 / us / 1e3);
    }
    for (int C : {2}) {
      auto K = hist<8, 1, 2>;
      CK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      CK(cudaFuncSetAttribute(K, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = C; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
      cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
      cfg.gridDim = dim3((sms / C) * C);
      int maxc = 0;
      CK(cudaOccupancyMaxActiveClusters(&maxc, (void*)K, &cfg));
      cfg.gridDim = dim3(std::min(maxc, sms / C) * C);
      auto go = [&] { CK(cudaMemsetAsync(h, 0, bins * 4, s)); CK(cudaLaunchKernelEx(&cfg, K, (const int4*)x, h, bins, lc, packs, sink)); };
      float us = time(go);
      go(); CK(cudaStreamSynchronize(s));
      char name[64]; snprintf(name, 64, "cluster %d flush+memset (grid %d)", C, cfg.gridDim.x);
      check(name);
      printf("  %-34s %8.2f us  %7.1f GB/s  (max active clusters %d)\n", name, us, n * 4 / us / 1e3, maxc);
    }
  }
  float c = time([&] { copy16<<<sms * 8, 256, 0, s>>>((const int4*)x, cp, packs); });
  printf("copy16 of 256 MiB: %.2f us, %.1f GB/s (read+write)\n", c, 2.0 * n * 4 / c / 1e3);
  return 0;
}
