// Issue 25, the H200's row ops: is it the row's structure or its math that streams ~3 % below the copy?
// f16 rows of K values, one block per row, as the shipped norm/softmax kernels run them; each kernel
// copies y = x (so its output is checked bit for bit), with or without the row ops' two block reductions:
//   flat        the copy peak's shape: one 16-byte pack a thread, as many blocks as that takes
//   reg         a block per row, each thread's packs loaded into registers, then stored
//   reg+2red    the same with two block reductions (layer_norm's mean, variance) before the store
//   smem        a block per row, the row copied into shared memory with cp.async (the shipped smem plan),
//               each thread storing back the packs it copied
//   smem+2red   the same with two reduction passes over the shared row before the store
// Rotating: two buffer sets (>= 3x L2 together), 40 launches alternating them in one CUDA graph, event
// time per launch, median of 7 replays; outputs poisoned first and compared with x after timing.
// nvcc -O3 -arch=sm_90 -std=c++17 rows-copy.cu -o rows-copy && ./rows-copy
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

extern __shared__ __align__(16) unsigned char dyn[];

__device__ __forceinline__ float block_sum(float v, float* sc) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  const int w = threadIdx.x / 32, l = threadIdx.x % 32, nw = blockDim.x / 32;
  __syncthreads();  // sc reused by the next call
  if (l == 0) sc[w] = v;
  __syncthreads();
  v = l < nw ? sc[l] : 0.f;
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  return v;
}

__device__ __forceinline__ float pack_sum(uint4 u, float shift, bool sq) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    const float a = f.x - shift, b = f.y - shift;
    s += sq ? a * a + b * b : a + b;
  }
  return s;
}

__global__ void flat(const uint4* __restrict__ x, uint4* __restrict__ y, int64_t packs) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < packs) y[i] = x[i];
}

// MODE 0 reg, 1 reg+2red; P packs a row, NP = P / blockDim.x a thread (compiled per count, as shipped)
template <int MODE, int NP>
__global__ void reg_rows(const uint4* __restrict__ x, uint4* __restrict__ y, int P) {
  __shared__ float sc[32];
  const uint4* xr = x + int64_t(blockIdx.x) * P;
  uint4* yr = y + int64_t(blockIdx.x) * P;
  uint4 r[NP];
#pragma unroll
  for (int i = 0; i < NP; ++i) r[i] = xr[threadIdx.x + i * blockDim.x];
  uint32_t flip = 0;
  if (MODE == 1) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < NP; ++i) s += pack_sum(r[i], 0.f, false);
    const float mean = block_sum(s, sc) / (P * 8);
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < NP; ++i) q += pack_sum(r[i], mean, true);
    const float var = block_sum(q, sc);
    flip = var < 0.f ? 1u : 0u;  // never: the store depends on both reductions
  }
#pragma unroll
  for (int i = 0; i < NP; ++i) { uint4 o = r[i]; o.x ^= flip; yr[threadIdx.x + i * blockDim.x] = o; }
}

template <int MODE>
void reg_launch(int np, unsigned rows, int th, cudaStream_t st, const uint4* x, uint4* y, int P) {
  switch (np) {
    case 1: reg_rows<MODE, 1><<<rows, th, 0, st>>>(x, y, P); break;
    case 2: reg_rows<MODE, 2><<<rows, th, 0, st>>>(x, y, P); break;
    case 4: reg_rows<MODE, 4><<<rows, th, 0, st>>>(x, y, P); break;
    case 8: reg_rows<MODE, 8><<<rows, th, 0, st>>>(x, y, P); break;
    case 16: reg_rows<MODE, 16><<<rows, th, 0, st>>>(x, y, P); break;
  }
}

__device__ __forceinline__ void cp16(void* s, const void* g) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g));
}

// MODE 2 smem, 3 smem+2red
template <int MODE>
__global__ void smem_rows(const uint4* __restrict__ x, uint4* __restrict__ y, int P) {
  __shared__ float sc[32];
  uint4* s = reinterpret_cast<uint4*>(dyn);
  const uint4* xr = x + int64_t(blockIdx.x) * P;
  uint4* yr = y + int64_t(blockIdx.x) * P;
  for (int p = threadIdx.x; p < P; p += blockDim.x) cp16(s + p, xr + p);
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  uint32_t flip = 0;
  if (MODE == 3) {
    float a = 0.f;
    for (int p = threadIdx.x; p < P; p += blockDim.x) a += pack_sum(s[p], 0.f, false);
    const float mean = block_sum(a, sc) / (P * 8);
    float q = 0.f;
    for (int p = threadIdx.x; p < P; p += blockDim.x) q += pack_sum(s[p], mean, true);
    flip = block_sum(q, sc) < 0.f ? 1u : 0u;
  }
  for (int p = threadIdx.x; p < P; p += blockDim.x) { uint4 o = s[p]; o.x ^= flip; yr[p] = o; }
}

__global__ void count_diff(const uint4* a, const uint4* b, int64_t n, unsigned long long* bad) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 u = a[i], v = b[i];
    if (u.x != v.x || u.y != v.y || u.z != v.z || u.w != v.w) atomicAdd(bad, 1ull);
  }
}
__global__ void fill(uint4* x, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    __half2 v[4];
    for (int k = 0; k < 4; ++k) { h = h * 1664525u + 1013904223u; v[k] = __floats2half2_rn((h >> 8) * 1e-7f - 0.8f, (h & 0xffff) * 1e-5f - 0.3f); }
    x[i] = *reinterpret_cast<uint4*>(v);
  }
}

struct Set { uint4 *x, *y; };

template <typename L>
double time_rot(Set* sets, int64_t packs, L launch, unsigned long long* bad, const char* name, bool* ok) {
  cudaStream_t st; CK(cudaStreamCreate(&st));
  for (int s = 0; s < 2; ++s) CK(cudaMemsetAsync(sets[s].y, 0xff, packs * 16, st));
  cudaGraph_t g; cudaGraphExec_t ge;
  const int L_ = 40;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < L_; ++i) launch(sets[i % 2], st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  // checked after the first replay and again after timing: every output equals its input
  auto check = [&]() {
    CK(cudaMemset(bad, 0, 8));
    for (int s = 0; s < 2; ++s) count_diff<<<1056, 256, 0, st>>>(sets[s].x, sets[s].y, packs, bad);
    unsigned long long h = 0; CK(cudaMemcpyAsync(&h, bad, 8, cudaMemcpyDeviceToHost, st)); CK(cudaStreamSynchronize(st));
    return h;
  };
  unsigned long long b0 = check();
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms * 1e3 / L_);
  }
  unsigned long long b1 = check();
  std::sort(t.begin(), t.end());
  *ok = b0 == 0 && b1 == 0;
  if (!*ok) printf("  %s: WRONG output (%llu / %llu packs differ)\n", name, b0, b1);
  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g)); CK(cudaStreamDestroy(st));
  return t[3];
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  int drv; CK(cudaDriverGetVersion(&drv));
  printf("# %s, %d SMs, L2 %d MiB, driver API %d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, drv);
  printf("# f16 rows, rotating (2 sets, 40 launches a graph), median of 7 replays, us per launch; GB/s = (read + written) / time\n");
  unsigned long long* bad; CK(cudaMalloc(&bad, 8));
  const int64_t max_packs = (512ll << 20) / 16;  // 512 MiB in, 512 out, per set
  Set sets[2];
  for (int s = 0; s < 2; ++s) {
    CK(cudaMalloc(&sets[s].x, max_packs * 16)); CK(cudaMalloc(&sets[s].y, max_packs * 16));
    fill<<<1056, 256>>>(sets[s].x, max_packs, 17u + s);
  }
  CK(cudaDeviceSynchronize());
  const int Ks[3] = {1024, 4096, 16384};
  const int64_t moved[2] = {256ll << 20, 1024ll << 20};
  printf("%-6s %-8s %-12s %-8s %10s %9s %8s\n", "K", "rows", "kernel", "threads", "us", "GB/s", "% flat");
  int wrong = 0;
  for (int K : Ks) {
    const int P = K / 8;
    for (int64_t mv : moved) {
      const int64_t packs = mv / 2 / 16, rows = packs / P;
      bool ok;
      const double tf = time_rot(sets, packs, [&](Set s, cudaStream_t st) {
        flat<<<unsigned((packs + 255) / 256), 256, 0, st>>>(s.x, s.y, packs); }, bad, "flat", &ok);
      wrong += !ok;
      auto row = [&](const char* name, int th, double t) {
        printf("%-6d %-8lld %-12s %-8d %10.2f %9.0f %8.1f\n", K, (long long)rows, name, th, t, mv / t * 1e-3, 100 * tf / t);
      };
      row("flat", 256, tf);
      for (int th : {64, 128, 256, 512}) {
        if (P % th || P / th > 16) continue;
        double t;
        t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { reg_launch<0>(P / th, unsigned(rows), th, st, s.x, s.y, P); }, bad, "reg", &ok);
        wrong += !ok; row("reg", th, t);
        t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { reg_launch<1>(P / th, unsigned(rows), th, st, s.x, s.y, P); }, bad, "reg+2red", &ok);
        wrong += !ok; row("reg+2red", th, t);
      }
      for (int th : {64, 128, 256, 512}) {
        if (P % th) continue;
        double t;
        t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { smem_rows<2><<<unsigned(rows), th, P * 16, st>>>(s.x, s.y, P); }, bad, "smem", &ok);
        wrong += !ok; row("smem", th, t);
        t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { smem_rows<3><<<unsigned(rows), th, P * 16, st>>>(s.x, s.y, P); }, bad, "smem+2red", &ok);
        wrong += !ok; row("smem+2red", th, t);
      }
    }
  }
  printf("# outputs wrong: %d kernels\n", wrong);
  return wrong != 0;
}
