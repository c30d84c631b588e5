// Issue 25: on the H200 layer_norm f16 reads 93.7-94.9 % of the copy peak rotating at 128 MiB against a
// copy floor of 97-98 % (README); at K = 16384 the row kernels stream at 96.3 % where the copy streams at
// 99.5 % (logs/7c31896ca12f/rows-by-count.log). The shipped plan (norm_rows_smem: a block per row, the row
// copied into shared memory with cp.async, then sum, centred-square and normalize passes, then exit) reads
// nothing while a block reduces and writes. Here, beside it (#include "norm.cu", its own launcher), a
// persistent kernel that loads the next row into a second buffer while it works on this one:
//   copy      the copy of the same bytes (16-byte grid-stride, one wave): the floor
//   shipped   launch_norm<false, __half, 8, 0, 0> as labkit calls it
//   pipe Bn   ln_pipe: B blocks per SM, each over rows blockIdx.x, + gridDim.x, ...; row i+1's cp.async
//             issued before row i's passes (each thread copies and reads only its own packs: no barrier)
// Each output checked against float64 (|err| <= 4e-3 + 4e-3 |want|, f16 storage) before timing.
// nvcc -O3 -arch=sm_90 -std=c++17 -I kernels rows-pipe.cu -o /tmp/rp && /tmp/rp
#include "norm.cu"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
constexpr int SETS = 3, VEC = 8;
constexpr float EPS = 1e-5f;

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

__global__ void __launch_bounds__(512) ln_pipe(const __half* __restrict__ x, __half* __restrict__ y, int64_t rows, int K) {
  extern __shared__ __align__(16) unsigned char sm[];
  __shared__ float scratch[LK_WARP];
  __half* buf = reinterpret_cast<__half*>(sm);
  const int P = K / VEC;
  auto load = [&](int64_t r, __half* dst) {
    if (r < rows)
      for (int p = threadIdx.x; p < P; p += blockDim.x) lk_cp_async16(dst + p * VEC, x + r * K + p * VEC);
    commit();  // an empty group past the last row keeps wait_one's count right
  };
  load(blockIdx.x, buf);
  for (int64_t r = blockIdx.x, i = 0; r < rows; r += gridDim.x, ++i) {
    __half* cur = buf + (i & 1) * K;
    load(r + gridDim.x, buf + ((i + 1) & 1) * K);
    wait_one();  // this row's copies (this thread's own packs) have landed
    auto pass = [&](bool square, float shift) {
      float a0 = 0.f, a1 = 0.f;
      for (int p = threadIdx.x; p < P; p += blockDim.x) {
        float v[VEC];
        to_floats(v, *reinterpret_cast<const Pack<__half, VEC>*>(cur + p * VEC));
#pragma unroll
        for (int k = 0; k < VEC; k += 2) {
          const float d0 = v[k] - shift, d1 = v[k + 1] - shift;
          a0 += square ? d0 * d0 : d0, a1 += square ? d1 * d1 : d1;
        }
      }
      return row_reduce<false, false>(a0 + a1, scratch);
    };
    const float mean = pass(false, 0.f) / K;
    const float a = rsqrtf(pass(true, mean) / K + EPS);
    __half* yr = y + r * K;
    for (int p = threadIdx.x; p < P; p += blockDim.x) {
      float v[VEC];
      to_floats(v, *reinterpret_cast<const Pack<__half, VEC>*>(cur + p * VEC));
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = (v[k] - mean) * a;
      Pack<__half, VEC> o;
      from_floats(o, v);
      lk_store<16>(yr + p * VEC, o);
    }
  }
}

__global__ void __launch_bounds__(256) copy16(const int4* __restrict__ x, int4* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] = x[i];
}
__global__ void flush_read(const int4* __restrict__ b, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) acc ^= b[i].x;
  if (acc == 0x12345678) *sink = acc;
}

int main() {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
  const int64_t n = int64_t(1) << 26;  // 128 MiB of f16 in, 128 out
  __half *x[SETS], *y[SETS]; int* sink; int4* fb;
  const int64_t fbn = 2LL * l2 / 16;
  for (int i = 0; i < SETS; ++i) { CK(cudaMalloc(&x[i], n * 2)); CK(cudaMalloc(&y[i], n * 2)); }
  CK(cudaMalloc(&sink, 64)); CK(cudaMalloc(&fb, fbn * 16)); CK(cudaMemset(fb, 0, fbn * 16));
  std::vector<__half> hx(n), got(n);
  srand(7);
  for (int i = 0; i < SETS; ++i) {
    for (int64_t k = 0; k < n; ++k) hx[k] = __float2half((rand() % 4001 - 2000) * 1e-3f + 0.5f);
    CK(cudaMemcpy(x[i], hx.data(), n * 2, cudaMemcpyHostToDevice));
  }
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  CK(cudaFuncSetAttribute(ln_pipe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  printf("%s, %d SMs, L2 %d MiB; layer_norm f16, 2^26 values (128 MiB in + 128 MiB out a launch)\n", prop.name, sms, l2 >> 20);
  for (int K : {16384, 8192, 4096, 1024}) {
    const int64_t rows = n / K;
    std::vector<double> mean(rows), rstd(rows);  // reference of the last set
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, q = 0;
      for (int k = 0; k < K; ++k) m += __half2float(hx[r * K + k]);
      m /= K;
      for (int k = 0; k < K; ++k) { const double d = __half2float(hx[r * K + k]) - m; q += d * d; }
      mean[r] = m, rstd[r] = 1.0 / std::sqrt(q / K + EPS);
    }
    const int P = K / VEC;
    int threads = ceil_div(ceil_div(P, 8), LK_WARP) * LK_WARP;
    threads = threads < 128 ? 128 : threads > 512 ? 512 : threads;  // the shipped smem plan's block
    printf("%lldx%d (pipe: %d threads a block, 2 x %d KiB of shared memory)\n", (long long)rows, K, threads, K * 2 >> 10);
    std::vector<int> modes = {0, 1};
    for (int b : {2, 3, 4, 6, 8, 12}) if (int64_t(b) * 2 * K * 2 <= (200 << 10) && b * threads <= 2048) modes.push_back(100 + b);
    for (int mode : modes) {
      char name[64];
      if (mode == 0) snprintf(name, sizeof name, "copy");
      else if (mode == 1) snprintf(name, sizeof name, "shipped (norm_rows_smem)");
      else snprintf(name, sizeof name, "pipe B%d", mode - 100);
      auto run = [&](int set) {
        if (mode == 0) { copy16<<<sms * 8, 256, 0, s>>>((const int4*)x[set], (int4*)y[set], n / 8); return; }
        if (mode == 1) {
          lk_args a = {};
          a.nt = 2;
          for (int t = 0; t < 2; ++t) {
            a.t[t].data = t ? (void*)y[set] : (void*)x[set];
            a.t[t].numel = n; a.t[t].ndim = 2; a.t[t].size[0] = rows; a.t[t].size[1] = K; a.t[t].itemsize = 2;
          }
          a.f[0] = EPS, a.f[1] = 1.0, a.f[2] = 0.0;
          launch_norm<false, __half, 8, 0, 0>(&a, s);
          return;
        }
        const int b = mode - 100;
        const int64_t grid = std::min<int64_t>(rows, int64_t(sms) * b);
        ln_pipe<<<grid, threads, 2 * K * 2, s>>>(x[set], y[set], rows, K);
      };
      if (mode > 0) {
        for (int rep = 0; rep < 2; ++rep) {
          CK(cudaMemset(y[SETS - 1], 0xff, n * 2)); run(SETS - 1); CK(cudaStreamSynchronize(s)); CK(cudaGetLastError());
          CK(cudaMemcpy(got.data(), y[SETS - 1], n * 2, cudaMemcpyDeviceToHost));
          int64_t bad = 0;
          for (int64_t k = 0; k < n; ++k) {
            const double want = (__half2float(hx[k]) - mean[k / K]) * rstd[k / K];
            if (!(std::fabs(__half2float(got[k]) - want) <= 4e-3 + 4e-3 * std::fabs(want))) ++bad;
          }
          if (bad) { printf("  %-26s WRONG (%lld elements)\n", name, (long long)bad); goto next; }
        }
      }
      {
        std::vector<float> cold, rot;
        for (int i = 0; i < 43; ++i) {
          flush_read<<<sms * 4, 512, 0, s>>>(fb, fbn, sink);
          CK(cudaEventRecord(e0, s)); run(i % SETS); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) cold.push_back(ms * 1e3f);
        }
        for (int r = 0; r < 12; ++r) {
          for (int i = 0; i < 6; ++i) run(i % SETS);
          CK(cudaEventRecord(e0, s));
          for (int i = 0; i < 30; ++i) run(i % SETS);
          CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 2) rot.push_back(ms * 1e3f / 30);
        }
        std::sort(cold.begin(), cold.end()); std::sort(rot.begin(), rot.end());
        const float c = cold[cold.size() / 2], ro = rot[rot.size() / 2];
        const double mb = 2.0 * n * 2 / 1e6;
        printf("  %-26s cold %8.2f us %6.0f GB/s | rotating %8.2f us %6.0f GB/s (rotating min..max %.2f..%.2f)\n", name, c,
               mb / c * 1e3, ro, mb / ro * 1e3, rot.front(), rot.back());
      }
    next:
      CK(cudaGetLastError());
    }
  }
  return 0;
}
