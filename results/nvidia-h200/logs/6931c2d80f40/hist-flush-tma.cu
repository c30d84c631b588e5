// Issue 25: hist_coop.log (H100, 2^24 values): counting costs nothing over a read-only kernel (25.2 us
// rotating at 4096 bins), the shipped flush + zeroing 2.6 us, and spreading the flush's atomics over 4-16
// replicas, a grid barrier or DSMEM clusters did not make it cheaper (256 bins: 5.2 us). Suspect: the
// flush reads the interleaved copies with bank conflicts (bin b of copy c at b * C + c: a warp's 32 bins
// at stride C words, C-way conflicts, 32-way at C = 32). Here: the shipped flush vs a conflict-free one
// (a warp reads 32 consecutive words, sums each bin's C copies with shuffles), and 1 vs 2 blocks per SM.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
constexpr int T = 1024, U = 4, SETS = 4;

__device__ __forceinline__ void count_at(uint32_t base, int v, int bins, int shift) {
  const bool in = static_cast<unsigned>(v) < static_cast<unsigned>(bins);
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(base + (uint32_t(in ? v : 0) << shift)), "r"(uint32_t(in)) : "memory");
}

// MODE 0: read only (xor); 1: count, no flush; 2: shipped flush; 3: conflict-free flush (rotated reads);
// 4: the copies summed into a compact array, then added to hist by TMA bulk reductions (cp.reduce.async.bulk);
// 5: as 4, waiting for the reductions' completion, not only their reads of shared memory
template <int MODE, int MINB>
__global__ void __launch_bounds__(T, MINB) hist(const int4* __restrict__ x, int* __restrict__ hist, int bins, int log_copies,
                                                int64_t packs, int* sink) {
  extern __shared__ int shc[];
  const int copies = 1 << log_copies, shift = log_copies + 2;
  const int words = (copies * bins + 31) & ~31;  // padded to whole warps of words (the pad stays 0)
  for (int i = threadIdx.x; i < words; i += T) shc[i] = 0;
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
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __syncthreads();
  if (MODE == 2) {
    const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
    for (int k = threadIdx.x; k < bins; k += T) {
      const int b = k + start < bins ? k + start : k + start - bins;
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + j];
      if (c) atomicAdd(hist + b, c);
    }
    return;
  }
  const int start = int(int64_t(blockIdx.x) * bins / gridDim.x) & ~31;
  const int rot = (threadIdx.x % 32) * copies / 32;
  if (MODE == 3) {
    for (int k = threadIdx.x; k < bins; k += T) {
      const int b = k + start < bins ? k + start : k + start - bins;
      int c = 0;
      for (int j = 0; j < copies; ++j) c += shc[b * copies + ((j + rot) & (copies - 1))];
      if (c) atomicAdd(hist + b, c);
    }
    return;
  }
  constexpr int MAXK = 16;  // bins <= 16 K here
  int sum[MAXK];
#pragma unroll
  for (int i = 0; i < MAXK; ++i) {
    const int b = threadIdx.x + i * T;
    sum[i] = 0;
    if (b < bins)
      for (int j = 0; j < copies; ++j) sum[i] += shc[b * copies + ((j + rot) & (copies - 1))];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < MAXK; ++i)
    if (threadIdx.x + i * T < bins) shc[threadIdx.x + i * T] = sum[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  // chunks of 1024 bins (4 KiB), one per issuing thread (hist and bins 16-byte multiples here), from the
  // block's own start
  const int chunks = (bins + 1023) / 1024, cstart = start / 1024;
  if (threadIdx.x < chunks) {
    const int ch = (threadIdx.x + cstart) % chunks;
    const int lo = ch * 1024, n = min(1024, bins - lo);
    const uint32_t src = uint32_t(__cvta_generic_to_shared(shc + lo));
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], %2;"
                 :: "l"(hist + lo), "r"(src), "r"(n * 4) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (MODE == 4) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
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

template <int MODE, int MINB>
void launch(const int4* xp, int* hp, int bins, int lc, int64_t packs, int* sink, int smem, int grid, cudaStream_t s) {
  if (MODE <= 1) { hist<MODE, MINB><<<grid, T, smem, s>>>(xp, hp, bins, lc, packs, sink); return; }
  zero_counts<<<std::min((bins + 1023) / 1024, 8), 1024, 0, s>>>(hp, bins);
  cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(grid); cfg.blockDim = dim3(T); cfg.dynamicSmemBytes = smem; cfg.stream = s; cfg.attrs = at; cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, hist<MODE, MINB>, xp, hp, bins, lc, packs, sink));
}

int main() {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const int64_t n = int64_t(1) << 24, packs = n / 4;
  int *x[SETS], *h[SETS], *sink; int4* fb;
  const int64_t fbn = 2LL * l2 / 16;
  for (int i = 0; i < SETS; ++i) { CK(cudaMalloc(&x[i], n * 4)); CK(cudaMalloc(&h[i], 1 << 20)); }
  CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16)); CK(cudaMemset(fb, 0, fbn * 16));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<int> hx(n);
  for (int bins : {4096, 256, 1024, 16384}) {
    srand(bins);
    for (int i = 0; i < SETS; ++i) {
      for (int64_t k = 0; k < n; ++k) hx[k] = rand() % (bins + 7) - 3;  // a few values outside [0, bins)
      CK(cudaMemcpy(x[i], hx.data(), n * 4, cudaMemcpyHostToDevice));
    }
    std::vector<int> ref(bins, 0);
    for (int64_t k = 0; k < n; ++k) if (hx[k] >= 0 && hx[k] < bins) ref[hx[k]]++;  // of set SETS-1
    for (int minb : {1}) for (int smem_kb : {96}) {
      int lc = 0; const int64_t one = 4LL * bins;
      while ((1 << lc) < 32 && (2LL << lc) * one <= (int64_t(smem_kb) << 10)) ++lc;
      const int smem = int((((one << lc) / 4 + 31) & ~31) * 4);
      if (smem > 227 * 1024 / minb) continue;
      const int grid = sms * minb;
      printf("bins %d, %d block(s) of %d per SM, copies %d, smem %d KiB, 2^24 values (64 MiB)\n", bins, minb, T, 1 << lc, smem >> 10);
      const char* names[] = {"read only (xor)", "count, no flush", "shipped flush (PDL zero)", "rotated-read flush (PDL zero)", "TMA bulk-reduce flush, wait read", "TMA bulk-reduce flush, wait all"};
      for (int mode = 0; mode < 6; ++mode) {
        auto run = [&](int set) {
          const int4* xp = (const int4*)x[set];
          if (minb == 1) {
            if (mode == 0) launch<0, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 1) launch<1, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 2) launch<2, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 3) launch<3, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 4) launch<4, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 5) launch<5, 1>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
          } else {
            if (mode == 0) launch<0, 2>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 1) launch<1, 2>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 2) launch<2, 2>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
            if (mode == 3) launch<3, 2>(xp, h[set], bins, lc, packs, sink, smem, grid, s);
          }
        };
        CK(cudaFuncSetAttribute(hist<0, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<1, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<3, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<4, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<5, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<0, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<1, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(hist<3, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        if (mode >= 2) {
          for (int rep = 0; rep < 2; ++rep) {
            CK(cudaMemset(h[SETS - 1], 0x55, bins * 4)); run(SETS - 1); CK(cudaStreamSynchronize(s));
            std::vector<int> got(bins); CK(cudaMemcpy(got.data(), h[SETS - 1], bins * 4, cudaMemcpyDeviceToHost));
            if (got != ref) { printf("  %-34s WRONG\n", names[mode]); break; }
          }
        }
        std::vector<float> cold, rot;
        for (int i = 0; i < 33; ++i) {
          flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
          CK(cudaEventRecord(e0, s)); run(i % SETS); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) cold.push_back(ms * 1e3f);
        }
        for (int r = 0; r < 12; ++r) {
          for (int i = 0; i < 8; ++i) run(i % SETS);
          CK(cudaEventRecord(e0, s));
          for (int i = 0; i < 40; ++i) run(i % SETS);
          CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 2) rot.push_back(ms * 1e3f / 40);
        }
        std::sort(cold.begin(), cold.end()); std::sort(rot.begin(), rot.end());
        const float c = cold[cold.size() / 2], ro = rot[rot.size() / 2];
        printf("  %-34s cold %7.2f us %6.0f GB/s | rotating %7.2f us %6.0f GB/s\n", names[mode], c, n * 4 / c / 1e3, ro, n * 4 / ro / 1e3);
        CK(cudaGetLastError());
      }
    }
  }
  return 0;
}
