// Issue 25: histogram i32, 4096 bins, 2^24 values (64 MiB): the shipped i32x4_sm reads 81.8 % (H100) / 75.1 %
// (H200) of the copy peak rotating, against a read-only floor of 94.9 / 91.4 %. Where do its fixed costs
// go, and does a cooperative launch (no zeroing kernel; the flush after one grid barrier) remove them?
// Timed two ways: cold (a 2xL2 read flush, then one launch between events) and rotating (launches back to
// back, cycling through 4 input sets of 64 MiB, events around 40 iterations). Every variant is checked.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
constexpr int T = 1024, U = 4, SETS = 4;

__device__ __forceinline__ void count_at(uint32_t base, int v, int bins, int shift) {
  const bool in = static_cast<unsigned>(v) < static_cast<unsigned>(bins);
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(base + (uint32_t(in ? v : 0) << shift)), "r"(uint32_t(in)) : "memory");
}

// MODE 0: read only (xor); 1: count, no flush; 2: shipped (PDL-zeroed hist, atomic flush);
// 3: coop, zero own slice, count, grid.sync, atomic flush; 4: coop, count, partials, grid.sync, slice sums;
// 5: coop like 3 but the barrier is a counter the blocks bump after zeroing (waited on before the flush)
// 6: flush into replica blockIdx % R of R zeroed replicas (no merge: the flush's cost alone, wrong result);
// 7: as 6, then the last block (a ticket) sums the replicas into hist and zeroes them: no zeroing kernel;
// 8: clusters of CL blocks: each adds its counts into its leader's shared copy 0 (DSMEM), the leader flushes
template <int MODE, int R = 8, int CL = 1>
__global__ void __launch_bounds__(T, 1) hist(const int4* __restrict__ x, int* __restrict__ hist, int bins, int log_copies,
                                             int64_t packs, int* __restrict__ part, unsigned* bar, int* sink) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;
  const int lo = int(int64_t(blockIdx.x) * bins / gridDim.x), hi = int(int64_t(blockIdx.x + 1) * bins / gridDim.x);
  if (MODE == 3 || MODE == 5)
    for (int i = lo + threadIdx.x; i < hi; i += T) hist[i] = 0;
  if (MODE == 5) {
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence(); atomicAdd(bar, 1u); }
  }
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
      if (MODE) {
        count_at(mine, r[u].x, bins, shift); count_at(mine, r[u].y, bins, shift);
        count_at(mine, r[u].z, bins, shift); count_at(mine, r[u].w, bins, shift);
      } else acc ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
    }
  }
  for (; p < packs; p += stride) {
    int4 r = __ldg(x + p);
    if (MODE) { count_at(mine, r.x, bins, shift); count_at(mine, r.y, bins, shift); count_at(mine, r.z, bins, shift); count_at(mine, r.w, bins, shift); }
    else acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  if (MODE == 0 && acc == 0x7fffffff) sink[0] = acc;
  if (MODE <= 1) return;
  if (MODE == 6 || MODE == 7) {
    __syncthreads();
    int* rep = part + int64_t(blockIdx.x % R) * bins;
    const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
    for (int k = threadIdx.x; k < bins; k += T) {
      const int b = k + start < bins ? k + start : k + start - bins;
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
      if (c) atomicAdd(rep + b, c);
    }
    if (MODE == 6) return;
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence(); last = atomicAdd(bar + 2, 1u) == gridDim.x - 1; }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int b = threadIdx.x; b < bins; b += T) {
      int c = 0;
#pragma unroll
      for (int r = 0; r < R; ++r) { int* q = part + int64_t(r) * bins + b; c += __ldcg(q); __stcg(q, 0); }
      hist[b] = c;
    }
    if (threadIdx.x == 0) bar[2] = 0;
    return;
  }
  if (MODE == 8) {
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();  // every block of the cluster has counted
    if (cl.block_rank() != 0) {
      int* lead = cl.map_shared_rank(shc, 0);
      for (int b = threadIdx.x; b < bins; b += T) {
        int c = 0;
        for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
        if (c) atomicAdd(lead + b * copies, c);
      }
    }
    cl.sync();
    if (cl.block_rank() != 0) return;
  }
  if (MODE == 2 || MODE == 8) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (MODE == 3) cg::this_grid().sync();
  if (MODE == 5) {
    if (threadIdx.x == 0) {  // every block has zeroed its slice; the last one through resets the counter
      unsigned target = gridDim.x;
      while (atomicAdd(bar, 0u) < target) __nanosleep(32);
    }
  }
  __syncthreads();
  if (MODE == 4) {
    int* mypart = part + int64_t(blockIdx.x) * bins;
    for (int b = threadIdx.x; b < bins; b += T) {
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
      mypart[b] = c;
    }
    cg::this_grid().sync();
    const int nb = hi - lo;
    for (int i = threadIdx.x; i < nb; i += T) shc[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < nb * int(gridDim.x); i += T) {
      const int b = i % nb, r = i / nb;
      atomicAdd(shc + b, __ldcg(part + int64_t(r) * bins + lo + b));
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += T) hist[lo + i] = shc[i];
    return;
  }
  const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
  for (int k = threadIdx.x; k < bins; k += T) {
    const int b = k + start < bins ? k + start : k + start - bins;
    int c = 0;
    for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
    if (c) atomicAdd(hist + b, c);
  }
  if (MODE == 5) {  // reset the counter for the next launch: the last block to finish does it
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(bar + 1, 1u) == gridDim.x - 1) { bar[0] = 0; bar[1] = 0; __threadfence(); }
    }
  }
}

__global__ void zero_counts(int* h, int bins) {
  asm volatile("griddepcontrol.launch_dependents;");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < bins; i += gridDim.x * blockDim.x) h[i] = 0;
}
__global__ void flush_read(const int4* __restrict__ b, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) acc ^= __ldcg(b + i).x;
  if (acc == 0x7fffffff) sink[0] = acc;
}

int main(int argc, char** argv) {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const int64_t n = int64_t(1) << 24, packs = n / 4;
  const int bins_list[] = {4096, 256, 16384};
  int *x[SETS], *h[SETS], *sink, *part; unsigned* bar; int4* fb;
  const int64_t fbn = 2LL * l2 / 16;
  for (int i = 0; i < SETS; ++i) { CK(cudaMalloc(&x[i], n * 4)); CK(cudaMalloc(&h[i], 1 << 20)); }
  CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16)); CK(cudaMalloc(&part, int64_t(sms) * 65536 * 4));
  CK(cudaMalloc(&bar, 64)); CK(cudaMemset(bar, 0, 64)); CK(cudaMemset(fb, 0, fbn * 16));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<int> hx(n);
  for (int bins : bins_list) {
    srand(bins);
    for (int i = 0; i < SETS; ++i) {
      for (int64_t k = 0; k < n; ++k) hx[k] = rand() % bins;
      CK(cudaMemcpy(x[i], hx.data(), n * 4, cudaMemcpyHostToDevice));
    }
    std::vector<int> ref(bins, 0);
    for (int64_t k = 0; k < n; ++k) ref[hx[k]]++;  // of set SETS-1
    const int smem_kb = 96;
    int lc = 0; const int64_t one = 4LL * bins;
    while ((1 << lc) < 32 && (2LL << lc) * one <= (int64_t(smem_kb) << 10)) ++lc;
    const int smem = int(std::max<int64_t>(one << lc, 4LL * (bins / sms + 2)));
    printf("bins %d copies %d smem %d KiB sms %d, 2^24 values (64 MiB)\n", bins, 1 << lc, smem >> 10, sms);
    auto run = [&](int mode, int set) {
      const int4* xp = (const int4*)x[set]; int* hp = h[set];
      static bool zeroed = false;
      if (!zeroed) { CK(cudaMemset(part, 0, int64_t(sms) * 65536 * 4)); zeroed = true; }
      void* args[] = {(void*)&xp, (void*)&hp, (void*)&bins, (void*)&lc, (void*)&packs, (void*)&part, (void*)&bar, (void*)&sink};
      switch (mode) {
        case 0: hist<0><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 1: hist<1><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 2: {
          zero_counts<<<std::min((bins + 1023) / 1024, 8), 1024, 0, s>>>(hp, bins);
          cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[1];
          at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.gridDim = dim3(sms); cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
          CK(cudaLaunchKernelEx(&cfg, hist<2>, xp, hp, bins, lc, packs, part, bar, sink)); break;
        }
        case 3: CK(cudaLaunchCooperativeKernel((void*)hist<3>, sms, T, args, smem, s)); break;
        case 4: CK(cudaLaunchCooperativeKernel((void*)hist<4>, sms, T, args, smem, s)); break;
        case 5: CK(cudaLaunchCooperativeKernel((void*)hist<5>, sms, T, args, smem, s)); break;
        case 6: hist<6><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 7: hist<7><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 8: hist<7, 16><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 9: hist<7, 4><<<sms, T, smem, s>>>(xp, hp, bins, lc, packs, part, bar, sink); break;
        case 10: case 11: {
          zero_counts<<<std::min((bins + 1023) / 1024, 8), 1024, 0, s>>>(hp, bins);
          cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[2];
          at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
          at[1].id = cudaLaunchAttributeClusterDimension; at[1].val.clusterDim.x = mode == 10 ? 2 : 4;
          at[1].val.clusterDim.y = 1; at[1].val.clusterDim.z = 1;
          const int g = sms / (mode == 10 ? 2 : 4) * (mode == 10 ? 2 : 4);
          cfg.gridDim = dim3(g); cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 2;
          CK(cudaLaunchKernelEx(&cfg, hist<8>, xp, hp, bins, lc, packs, part, bar, sink)); break;
        }
      }
    };
    const char* names[] = {"read only (xor)", "count, no flush, no zero", "shipped: PDL zero + atomic flush",
                           "coop: zero slice, grid.sync, atomics", "coop: partials, grid.sync, slice sums",
                           "coop: zero slice, counter, atomics", "8 replicas, no merge (wrong)",
                           "8 replicas + last-block merge", "16 replicas + last-block merge", "4 replicas + last-block merge",
                           "cluster 2 DSMEM merge, PDL zero", "cluster 4 DSMEM merge, PDL zero"};
    for (int mode = 0; mode < 12; ++mode) {
      if (mode >= 3 && mode <= 5) continue;
      CK(cudaMemset(part, 0, int64_t(sms) * 65536 * 4)); CK(cudaMemset(bar, 0, 64));
      if (mode == 0) CK(cudaFuncSetAttribute(hist<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 1) CK(cudaFuncSetAttribute(hist<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 2) CK(cudaFuncSetAttribute(hist<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 3) CK(cudaFuncSetAttribute(hist<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 4) CK(cudaFuncSetAttribute(hist<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 5) CK(cudaFuncSetAttribute(hist<5>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      // check (modes >= 2 produce the histogram of the set they read; poison it first)
      if (mode == 6) CK(cudaFuncSetAttribute(hist<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 7) CK(cudaFuncSetAttribute(hist<7>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 8) CK(cudaFuncSetAttribute(hist<7, 16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode == 9) CK(cudaFuncSetAttribute(hist<7, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode >= 10) CK(cudaFuncSetAttribute(hist<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      if (mode >= 2 && mode != 6) {
        for (int rep = 0; rep < 3; ++rep) {
          CK(cudaMemset(h[SETS - 1], 0x55, bins * 4)); run(mode, SETS - 1); CK(cudaStreamSynchronize(s));
          std::vector<int> got(bins); CK(cudaMemcpy(got.data(), h[SETS - 1], bins * 4, cudaMemcpyDeviceToHost));
          if (got != ref) { printf("  %-40s WRONG\n", names[mode]); break; }
        }
      }
      std::vector<float> cold, rot;
      for (int i = 0; i < 33; ++i) {
        flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
        CK(cudaEventRecord(e0, s)); run(mode, i % SETS); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) cold.push_back(ms * 1e3f);
      }
      for (int r = 0; r < 12; ++r) {
        for (int i = 0; i < 8; ++i) run(mode, i % SETS);
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < 40; ++i) run(mode, i % SETS);
        CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 2) rot.push_back(ms * 1e3f / 40);
      }
      std::sort(cold.begin(), cold.end()); std::sort(rot.begin(), rot.end());
      float c = cold[cold.size() / 2], ro = rot[rot.size() / 2];
      printf("  %-40s cold %7.2f us %6.0f GB/s | rotating %7.2f us %6.0f GB/s\n", names[mode], c, n * 4 / c / 1e3, ro, n * 4 / ro / 1e3);
      CK(cudaGetLastError());
    }
  }
  return 0;
}
