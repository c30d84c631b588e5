// Issue 25: reduce_sum f32x4_1pass reads 86.3 % of the H200's copy peak at 64 MiB rotating where the read
// floor (harness.cu's lk_read: the same loop and grid, a sum per block, no finish) reads 93.0 %: 18.1 against
// ~16.8 us. On the H100 the finish cost 1.1 us of a 64 MiB read (logs/c9ab59541530/floor.log). Here the
// one-pass loop with each way of ending it, at 2^24, 2^25 and 2^26 floats (64, 128, 256 MiB), cold (a
// 2 x L2 read flush before each launch) and rotating (sets spanning >= 3 L2, 30 launches back to back):
//   no finish     block sums stored, nothing after (what lk_read does)
//   shipped       reduce_sum_1pass<float, 4, 4> of kernels/reduce.cu (lk_last_block_sum: the whole last
//                 block reads the partials, block_reduce_sum: two barriers)
//   warp finish   the same ticket (lk_last_block), then only warp 0 of the last block reads the partials
//                 (all its loads issued before any add) and adds them with shuffles, no barrier
//   atomicAdd     one float atomicAdd per block into y, zeroed by a memset outside the events (for
//                 scale: not deterministic, the order of the adds varies)
// Each result checked against a float64 sum before timing (relative 1e-5 of the sum of |x|).
// nvcc -O3 -arch=sm_90 -std=c++17 -I kernels reduce-finish.cu -o /tmp/rf && for p in 24 25 26; do /tmp/rf $p; done
#include "reduce.cu"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
constexpr int T1 = kOnePassThreads, U = 4;

template <int FIN>
__global__ void __launch_bounds__(T1, 2) one_pass(const float4* __restrict__ x, float* __restrict__ y, int slot, int64_t packs) {
  __shared__ float scratch[32];
  const int64_t stride = int64_t(gridDim.x) * T1;
  float a = 0.f, b = 0.f;
  int64_t p = int64_t(blockIdx.x) * T1 + threadIdx.x;
  for (; p + (U - 1) * stride < packs; p += U * stride) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = x[p + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) a += r[u].x + r[u].y, b += r[u].z + r[u].w;
  }
  for (; p < packs; p += stride) {
    const float4 r = x[p];
    a += r.x + r.y, b += r.z + r.w;
  }
  const float s = block_reduce_sum<T1>(a + b, scratch);
  if (FIN == 0) {
    if (threadIdx.x == 0) lk_grid_part[slot][blockIdx.x] = s;
  } else if (FIN == 2) {
    float* part = lk_grid_part[slot];
    if (threadIdx.x == 0) part[blockIdx.x] = s;
    if (!lk_last_block(slot) || threadIdx.x >= LK_WARP) return;
    constexpr int K = LK_GRID_BLOCKS / LK_WARP;
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = threadIdx.x + k * LK_WARP < int(gridDim.x) ? __ldcg(part + threadIdx.x + k * LK_WARP) : 0.f;
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) t += v[k];
    t = warp_reduce_sum(t);
    if (threadIdx.x == 0) *y = t;
  } else {
    if (threadIdx.x == 0) atomicAdd(y, s);
  }
}

__global__ void flush_read(const int4* __restrict__ b, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) acc ^= b[i].x;
  if (acc == 0x12345678) *sink = acc;
}

int main(int argc, char** argv) {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
  const int64_t n = int64_t(1) << (argc > 1 ? atoi(argv[1]) : 24), packs = n / 4;
  const int sets = std::max<int64_t>(3, (3 * int64_t(l2) + 4 * n - 1) / (4 * n));
  std::vector<float*> x(sets);
  float* y; int* sink; int4* fb;
  const int64_t fbn = 2LL * l2 / 16;
  for (int i = 0; i < sets; ++i) CK(cudaMalloc(&x[i], n * 4));
  CK(cudaMalloc(&y, 64)); CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16)); CK(cudaMemset(fb, 0, fbn * 16));
  std::vector<float> hx(n);
  double ref = 0, mag = 0;
  srand(1);
  for (int i = 0; i < sets; ++i) {
    for (int64_t k = 0; k < n; ++k) hx[k] = (rand() % 20001 - 10000) * 1e-4f;
    CK(cudaMemcpy(x[i], hx.data(), n * 4, cudaMemcpyHostToDevice));
  }
  for (int64_t k = 0; k < n; ++k) ref += hx[k], mag += std::fabs(hx[k]);  // the last set's
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const int64_t want = ceil_div<int64_t>(packs, int64_t(T1) * U);
  const int shipped_grid = int(std::min<int64_t>({want, (int64_t)lk_resident_grid<reduce_sum_1pass<float, 4, U>>(T1), (int64_t)LK_GRID_BLOCKS}));
  const int grid = int(std::min<int64_t>({want, (int64_t)lk_resident_grid<one_pass<2>>(T1), (int64_t)LK_GRID_BLOCKS}));
  const double mb = n * 4 / 1e6;
  printf("%s, %d SMs, L2 %d MiB; reduce_sum f32 %lld values (%.0f MB), grids %d (shipped) / %d, %d sets\n", prop.name, sms, l2 >> 20,
         (long long)n, mb, shipped_grid, grid, sets);
  const char* names[] = {"no finish", "shipped", "warp finish", "atomicAdd"};
  for (int mode = 0; mode < 4; ++mode) {
    auto run = [&](int set) {
      const float4* xp = (const float4*)x[set];
      switch (mode) {
        case 0: one_pass<0><<<grid, T1, 0, s>>>(xp, y, 0, packs); break;
        case 1: reduce_sum_1pass<float, 4, U><<<shipped_grid, T1, 0, s>>>(x[set], y, 0, lk_split{0, packs, 0, true}); break;
        case 2: one_pass<2><<<grid, T1, 0, s>>>(xp, y, 0, packs); break;
        default: one_pass<3><<<grid, T1, 0, s>>>(xp, y, 0, packs);
      }
    };
    if (mode > 0) {  // checked before timing: a poisoned y, the total against float64
      for (int rep = 0; rep < 2; ++rep) {
        CK(cudaMemset(y, mode == 3 ? 0 : 0xff, 4)); run(sets - 1); CK(cudaStreamSynchronize(s));
        float got; CK(cudaMemcpy(&got, y, 4, cudaMemcpyDeviceToHost));
        if (!(std::fabs(got - ref) <= 1e-5 * mag)) { printf("  %-12s WRONG: %.6f, want %.6f\n", names[mode], got, ref); goto next; }
      }
    }
    {
      std::vector<float> cold, rot;
      for (int i = 0; i < 43; ++i) {
        flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
        if (mode == 3) CK(cudaMemsetAsync(y, 0, 4, s));
        CK(cudaEventRecord(e0, s)); run(i % sets); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) cold.push_back(ms * 1e3f);
      }
      for (int r = 0; r < 12; ++r) {
        for (int i = 0; i < 6; ++i) run(i % sets);
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < 30; ++i) run(i % sets);
        CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 2) rot.push_back(ms * 1e3f / 30);
      }
      std::sort(cold.begin(), cold.end()); std::sort(rot.begin(), rot.end());
      const float c = cold[cold.size() / 2], ro = rot[rot.size() / 2];
      printf("  %-12s cold %8.2f us %6.0f GB/s | rotating %8.2f us %6.0f GB/s (rotating min..max %.2f..%.2f)\n", names[mode], c, mb / c * 1e3,
             ro, mb / ro * 1e3, rot.front(), rot.back());
    }
  next:
    CK(cudaGetLastError());
  }
  return 0;
}
