// Issue 25, after softmax-vec.cu (logs/0f8bba0b1d9a): the whole-vector softmax's normalize pass is a one-wave
// grid-stride loop (8 blocks of 256 per SM, 2 packs a round), and so were that probe's "plain" read + copy,
// which reached 91.6 % of the copy peak. The copy peak's own kernel (copy.cu w16) is one pack per thread over
// as many blocks as packs, and in rows-pipe.cu (logs/92c28cd) a one-wave grid-stride copy read 86 % rotating
// where the shipped block-per-row kernels read 92-94 %. Here the normalize pass in the copy's shape: the
// partials kernel's last block (a ticket, as lk_last_block_sum) merges the blocks' (max, sum) pairs into one
// (max, 1/sum), and every thread of a flat grid normalizes PT packs, blocks in reverse order (the vector's
// tail, which the partials pass read last, first). Each output checked against float64 before timing.
//   plain grid      read + copy, both one-wave grid-stride (softmax-vec.cu's "ideal")
//   plain flat      read one-wave grid-stride + the w16-shaped copy (one pack a thread)
//   shipped         softmax_partials + softmax_normalize (kernels/softmax.cu)
//   flat PTn [fwd]  partials with the merge, then normalize_flat<PT> (reverse block order unless fwd)
// nvcc -O3 -arch=sm_90 -std=c++17 -I kernels softmax-shape.cu -o /tmp/ss && /tmp/ss [log2 n]
// (kernels/softmax.cu as of 5a55846ece28: since bba28cd2ea79 it ships the flat normalize, other signatures;
//  mkdir -p /tmp/oldk && git show 5a55846ece28:kernels/softmax.cu > /tmp/oldk/softmax.cu, then -I /tmp/oldk -I kernels)
#include "softmax.cu"
#include "lk_grid.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
constexpr int FT = 256;

// the shipped partials loop (2 packs a round), then the grid's merge in its last block: fin = (max, 1/sum)
__global__ void __launch_bounds__(SM_THREADS, SM_BLOCKS_PER_SM) partials_merge(const float4* __restrict__ x, float* __restrict__ part,
                                                                               unsigned* ticket, float* __restrict__ fin, int64_t packs) {
  __shared__ MS scratch[LK_WARP];
  __shared__ bool last;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  MS acc{-INFINITY, 0.f};
  for (int64_t p0 = t; p0 < packs; p0 += stride * 2) {
    float4 r[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) if (p0 + u * stride < packs) r[u] = x[p0 + u * stride];
#pragma unroll
    for (int u = 0; u < 2; ++u) if (p0 + u * stride < packs) { const float f[4] = {r[u].x, r[u].y, r[u].z, r[u].w}; ms_push(acc, f); }
  }
  acc = block_reduce_ms(acc, scratch);
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = acc.m, part[2 * blockIdx.x + 1] = acc.s;
    last = lk_ticket(ticket, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  MS m{-INFINITY, 0.f};
  for (int i = threadIdx.x; i < int(gridDim.x); i += blockDim.x) m = ms_merge(m, MS{__ldcg(part + 2 * i), __ldcg(part + 2 * i + 1)});
  m = block_reduce_ms(m, scratch);
  if (threadIdx.x == 0) fin[0] = m.m, fin[1] = 1.f / m.s;
}

template <int PT, bool BACK>
__global__ void __launch_bounds__(FT) normalize_flat(const float4* __restrict__ x, float4* __restrict__ y, const float* __restrict__ fin,
                                                    int64_t packs) {
  const int64_t b = BACK ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t base = b * FT * PT + threadIdx.x;
  float4 r[PT];
#pragma unroll
  for (int u = 0; u < PT; ++u) if (base + u * FT < packs) r[u] = x[base + u * FT];  // before fin: they do not wait for it
  const float mx = fin[0], inv = fin[1];
#pragma unroll
  for (int u = 0; u < PT; ++u) if (base + u * FT < packs) {
    float4 o = r[u];
    o.x = __expf(o.x - mx) * inv; o.y = __expf(o.y - mx) * inv; o.z = __expf(o.z - mx) * inv; o.w = __expf(o.w - mx) * inv;
    y[base + u * FT] = o;
  }
}

__global__ void __launch_bounds__(SM_THREADS, SM_BLOCKS_PER_SM) read_k(const float4* __restrict__ x, float* __restrict__ part, int64_t packs) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  float s = 0.f;
  for (int64_t p = t; p < packs; p += 2 * stride) {
    float4 a = x[p], b = p + stride < packs ? x[p + stride] : make_float4(0, 0, 0, 0);
    s += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
  }
  if (s == 12345.f) part[blockIdx.x] = s;  // keeps the loads
}
__global__ void __launch_bounds__(SM_THREADS, SM_BLOCKS_PER_SM) copy_grid(const float4* __restrict__ x, float4* __restrict__ y, int64_t packs) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = t; p < packs; p += 2 * stride) {
    float4 a = x[p], b;
    if (p + stride < packs) b = x[p + stride];
    y[p] = a;
    if (p + stride < packs) y[p + stride] = b;
  }
}
__global__ void __launch_bounds__(FT) copy_flat(const float4* __restrict__ x, float4* __restrict__ y, int64_t packs) {
  const int64_t p = int64_t(blockIdx.x) * FT + threadIdx.x;
  if (p < packs) y[p] = x[p];
}
__global__ void flush_read(const int4* __restrict__ b, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) acc ^= b[i].x;
  if (acc == 0x12345678) *sink = acc;
}

int main(int argc, char** argv) {  // argv[1]: log2 of the values (default 26, the run of its log)
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
  const int64_t n = int64_t(1) << (argc > 1 ? atoi(argv[1]) : 26), packs = n / 4;
  const int grid = sms * SM_BLOCKS_PER_SM;
  // rotating: enough (x, y) sets that they span >= 3 L2 (3 at 2^26, the run of its log)
  const int sets = std::max<int64_t>(3, (3 * int64_t(l2) + 8 * n - 1) / (8 * n));
  std::vector<float*> x(sets), y(sets);
  float *part, *fin; unsigned* ticket; int* sink; int4* fb;
  const int64_t fbn = 2LL * l2 / 16;
  for (int i = 0; i < sets; ++i) { CK(cudaMalloc(&x[i], n * 4)); CK(cudaMalloc(&y[i], n * 4)); }
  CK(cudaMalloc(&part, 2 * grid * 4)); CK(cudaMalloc(&fin, 16)); CK(cudaMalloc(&ticket, 4)); CK(cudaMemset(ticket, 0, 4));
  CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16)); CK(cudaMemset(fb, 0, fbn * 16));
  std::vector<float> hx(n);
  srand(1);
  for (int i = 0; i < sets; ++i) {
    for (int64_t k = 0; k < n; ++k) hx[k] = (rand() % 20001 - 10000) * 1e-3f;
    CK(cudaMemcpy(x[i], hx.data(), n * 4, cudaMemcpyHostToDevice));
  }
  double mx = -1e30, sum = 0;  // reference of the last set
  for (int64_t k = 0; k < n; ++k) mx = std::max(mx, double(hx[k]));
  for (int64_t k = 0; k < n; ++k) sum += std::exp(double(hx[k]) - mx);
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  lk_split sp{0, packs, 0, true};
  printf("%s, %d SMs, L2 %d MiB; softmax f32 %lld values: x read twice + y written = %.0f MB a launch\n", prop.name, sms, l2 >> 20, (long long)n, 3.0 * n * 4 / 1e6);
  const char* names[] = {"plain grid (read + copy)", "plain flat (read + w16 copy)", "shipped", "flat PT1", "flat PT2", "flat PT4",
                         "flat PT2 fwd"};
  for (int mode = 0; mode < 7; ++mode) {
    auto flat = [&](int pt, bool back, const float4* xp, float4* yp) {
      const int64_t blocks = ceil_div<int64_t>(packs, int64_t(FT) * pt);
      if (pt == 1) normalize_flat<1, true><<<blocks, FT, 0, s>>>(xp, yp, fin, packs);
      if (pt == 2 && back) normalize_flat<2, true><<<blocks, FT, 0, s>>>(xp, yp, fin, packs);
      if (pt == 2 && !back) normalize_flat<2, false><<<blocks, FT, 0, s>>>(xp, yp, fin, packs);
      if (pt == 4) normalize_flat<4, true><<<blocks, FT, 0, s>>>(xp, yp, fin, packs);
    };
    auto run = [&](int set) {
      const float4* xp = (const float4*)x[set]; float4* yp = (float4*)y[set];
      switch (mode) {
        case 0: read_k<<<grid, SM_THREADS, 0, s>>>(xp, part, packs); copy_grid<<<grid, SM_THREADS, 0, s>>>(xp, yp, packs); break;
        case 1: read_k<<<grid, SM_THREADS, 0, s>>>(xp, part, packs); copy_flat<<<ceil_div<int64_t>(packs, FT), FT, 0, s>>>(xp, yp, packs); break;
        case 2: softmax_partials<float, 4, 16><<<grid, SM_THREADS, 0, s>>>(x[set], part, sp);
                softmax_normalize<float, 4, 16><<<grid, SM_THREADS, 0, s>>>(x[set], y[set], part, grid, sp); break;
        default: {
          partials_merge<<<grid, SM_THREADS, 0, s>>>(xp, part, ticket, fin, packs);
          const int pt[] = {1, 2, 4, 2};
          flat(pt[mode - 3], mode != 6, xp, yp);
        }
      }
    };
    if (mode > 1) {  // checked before timing: poisoned output, every element against float64
      for (int rep = 0; rep < 2; ++rep) {
        CK(cudaMemset(y[sets - 1], 0xff, n * 4)); run(sets - 1); CK(cudaStreamSynchronize(s));
        std::vector<float> got(n); CK(cudaMemcpy(got.data(), y[sets - 1], n * 4, cudaMemcpyDeviceToHost));
        int64_t bad = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double want = std::exp(double(hx[k]) - mx) / sum;
          if (!(std::fabs(got[k] - want) <= 1e-5 * want + 1e-12)) ++bad;
        }
        if (bad) { printf("  %-30s WRONG (%lld elements)\n", names[mode], (long long)bad); goto next; }
      }
    }
    {
      std::vector<float> cold, rot;
      for (int i = 0; i < 43; ++i) {
        flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
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
      const double mb = 3.0 * n * 4 / 1e6;
      printf("  %-30s cold %8.2f us %6.0f GB/s | rotating %8.2f us %6.0f GB/s (rotating min..max %.2f..%.2f)\n", names[mode], c, mb / c * 1e3,
             ro, mb / ro * 1e3, rot.front(), rot.back());
    }
  next:
    CK(cudaGetLastError());
  }
  return 0;
}
