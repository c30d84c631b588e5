// Issue 25, the H200's long rows (f16, K = 16384: every shipped form reads 93-96 % of a flat copy):
// do Hopper's bulk copies (TMA: cp.async.bulk, one instruction a row, completion counted on an mbarrier)
// help, and does a persistent block that loads its next rows while it works on this one (bytes in flight no
// longer bound to threads, rows handed out by an atomic counter, so no tail of whole rows) close the gap?
// Each kernel copies y = x, with two block reductions over the row before the store (layer_norm's mean and
// variance), so its output is checked bit for bit:
//   flat          the copy peak's shape: one 16-byte pack a thread, as many blocks as that takes
//   smem          the shipped smem plan: a block per row, cp.async 16 B a thread, sums, stores from smem
//   tma           a block per row, the row loaded by one bulk copy, sums, stores from smem
//   tma_bst       the same, the row written back into smem then one bulk store (what a norm would do)
//   pers{S}x{B}   persistent: B row buffers a block, as many blocks as fit, rows taken from a counter
//                 (S = d) or strided by the grid (S = s); each buffer reloaded as soon as its row is stored
// Rotating: two buffer sets (>= 3x L2 together), 40 launches alternating them in one CUDA graph, event
// time per launch, median of 7 replays; outputs poisoned first and compared with x after the first
// replay and again after timing.
// nvcc -O3 -arch=sm_90 -std=c++17 rows-tma.cu -o rows-tma && ./rows-tma
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

extern __shared__ __align__(128) unsigned char dyn[];

__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(b)) : "memory");
}
// thread 0: the barrier's one arrival, expecting `bytes`, then the bulk copy that completes them
__device__ __forceinline__ void tma_load(void* dst, const void* src, unsigned bytes, uint64_t* b) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sa(b)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, unsigned phase) {
  asm volatile("{\n .reg .pred p;\n W:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n"
               ::"r"(sa(b)), "r"(phase) : "memory");
}
__device__ __forceinline__ void tma_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(sa(src)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void tma_store_drain() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

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
// the two reductions over a row in smem; the flip they return is never set (var >= 0), but every store
// depends on it
__device__ __forceinline__ uint32_t two_sums(const uint4* s, int P, float* sc) {
  float a = 0.f;
  for (int p = threadIdx.x; p < P; p += blockDim.x) a += pack_sum(s[p], 0.f, false);
  const float mean = block_sum(a, sc) / (P * 8);
  float q = 0.f;
  for (int p = threadIdx.x; p < P; p += blockDim.x) q += pack_sum(s[p], mean, true);
  return block_sum(q, sc) < 0.f ? 1u : 0u;
}

__global__ void flat(const uint4* __restrict__ x, uint4* __restrict__ y, int64_t packs) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < packs) y[i] = x[i];
}

__global__ void smem_rows(const uint4* __restrict__ x, uint4* __restrict__ y, int P) {
  __shared__ float sc[32];
  uint4* s = reinterpret_cast<uint4*>(dyn);
  const uint4* xr = x + int64_t(blockIdx.x) * P;
  uint4* yr = y + int64_t(blockIdx.x) * P;
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa(s + p)), "l"(xr + p));
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  const uint32_t flip = two_sums(s, P, sc);
  for (int p = threadIdx.x; p < P; p += blockDim.x) { uint4 o = s[p]; o.x ^= flip; yr[p] = o; }
}

// BST: the row written back into smem, then one bulk store
template <bool BST>
__global__ void tma_rows(const uint4* __restrict__ x, uint4* __restrict__ y, int P) {
  __shared__ float sc[32];
  __shared__ __align__(8) uint64_t bar;
  uint4* s = reinterpret_cast<uint4*>(dyn);
  const uint4* xr = x + int64_t(blockIdx.x) * P;
  uint4* yr = y + int64_t(blockIdx.x) * P;
  if (threadIdx.x == 0) {
    mbar_init(&bar);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    tma_load(s, xr, unsigned(P) * 16, &bar);
  }
  __syncthreads();
  mbar_wait(&bar, 0);
  const uint32_t flip = two_sums(s, P, sc);
  if constexpr (!BST) {
    for (int p = threadIdx.x; p < P; p += blockDim.x) { uint4 o = s[p]; o.x ^= flip; yr[p] = o; }
    return;
  }
  for (int p = threadIdx.x; p < P; p += blockDim.x) { uint4 o = s[p]; o.x ^= flip; s[p] = o; }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic smem writes -> the bulk store
  __syncthreads();
  if (threadIdx.x == 0) { tma_store(yr, s, unsigned(P) * 16); tma_store_drain(); }
}

// Persistent: NB row buffers a block. DYN: rows from *next (reset by the block that finishes last, so
// each launch starts from 0), else row = blockIdx.x + k * gridDim.x.
template <int NB, bool DYN>
__global__ void pers_rows(const uint4* __restrict__ x, uint4* __restrict__ y, int P, int rows, int* next, int* done) {
  __shared__ float sc[32];
  __shared__ __align__(8) uint64_t bar[NB];
  __shared__ int rid[NB];
  uint4* buf = reinterpret_cast<uint4*>(dyn);
  const unsigned bytes = unsigned(P) * 16;
  int k_issue = 0;  // rows taken so far (thread 0)
  auto take = [&](int b) {  // thread 0: the next row into buffer b, or -1
    const int r = DYN ? atomicAdd(next, 1) : blockIdx.x + k_issue * gridDim.x;
    ++k_issue;
    rid[b] = r < rows ? r : -1;
    if (r < rows) tma_load(buf + int64_t(b) * P, x + int64_t(r) * P, bytes, &bar[b]);
  };
  if (threadIdx.x == 0) {
    for (int b = 0; b < NB; ++b) mbar_init(&bar[b]);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int b = 0; b < NB; ++b) take(b);
  }
  __syncthreads();
  for (int k = 0;; ++k) {
    const int b = k % NB;
    const int r = rid[b];
    if (r < 0) break;
    mbar_wait(&bar[b], (k / NB) & 1);
    const uint4* s = buf + int64_t(b) * P;
    const uint32_t flip = two_sums(s, P, sc);
    uint4* yr = y + int64_t(r) * P;
    for (int p = threadIdx.x; p < P; p += blockDim.x) { uint4 o = s[p]; o.x ^= flip; yr[p] = o; }
    __syncthreads();  // every thread done with buffer b (and with rid[b])
    if (threadIdx.x == 0) take(b);
    __syncthreads();  // rid[b] for round k + NB
  }
  if (DYN && threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(done, 1) == int(gridDim.x) - 1) { *next = 0; *done = 0; __threadfence(); }
  }
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

template <int NB, bool DYN>
void pers_setup(int P, int th, int* blocks) {
  auto k = pers_rows<NB, DYN>;
  const int smem = NB * P * 16;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, th, smem));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  *blocks = per_sm * prop.multiProcessorCount;
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  int drv; CK(cudaDriverGetVersion(&drv));
  printf("# %s, %d SMs, L2 %d MiB, driver API %d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, drv);
  printf("# f16 rows, rotating (2 sets, 40 launches a graph), median of 7 replays, us per launch; GB/s = (read + written) / time\n");
  unsigned long long* bad; CK(cudaMalloc(&bad, 8));
  int *next, *done; CK(cudaMalloc(&next, 8)); done = next + 1; CK(cudaMemset(next, 0, 8));
  const int64_t max_packs = (512ll << 20) / 16;  // 512 MiB in, 512 out, per set
  Set sets[2];
  for (int s = 0; s < 2; ++s) {
    CK(cudaMalloc(&sets[s].x, max_packs * 16)); CK(cudaMalloc(&sets[s].y, max_packs * 16));
    fill<<<1056, 256>>>(sets[s].x, max_packs, 17u + s);
  }
  CK(cudaDeviceSynchronize());
  CK(cudaFuncSetAttribute(smem_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
  CK(cudaFuncSetAttribute(tma_rows<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
  CK(cudaFuncSetAttribute(tma_rows<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
  struct Case { int K; int64_t rows; };
  const Case cases[] = {{16384, 4096}, {16384, 8192}, {16384, 16384}, {8192, 8192}, {4096, 16384}};
  printf("%-6s %-7s %-10s %-8s %-7s %10s %9s %8s\n", "K", "rows", "kernel", "threads", "blocks", "us", "GB/s", "% flat");
  int wrong = 0;
  for (const Case& c : cases) {
    const int K = c.K, P = K / 8;
    const int64_t rows = c.rows, packs = rows * P, mv = packs * 32;
    bool ok;
    const unsigned fb = unsigned((packs + 255) / 256);
    const double tf = time_rot(sets, packs, [&](Set s, cudaStream_t st) { flat<<<fb, 256, 0, st>>>(s.x, s.y, packs); }, bad, "flat", &ok);
    wrong += !ok;
    auto row = [&](const char* name, int th, long long blocks, double t) {
      printf("%-6d %-7lld %-10s %-8d %-7lld %10.2f %9.0f %8.1f\n", K, (long long)rows, name, th, blocks, t, mv / t * 1e-3, 100 * tf / t);
    };
    row("flat", 256, fb, tf);
    for (int th : {128, 256, 512}) {
      if (th * 2 > P) continue;
      double t;
      t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { smem_rows<<<unsigned(rows), th, P * 16, st>>>(s.x, s.y, P); }, bad, "smem", &ok);
      wrong += !ok; row("smem", th, rows, t);
      t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { tma_rows<false><<<unsigned(rows), th, P * 16, st>>>(s.x, s.y, P); }, bad, "tma", &ok);
      wrong += !ok; row("tma", th, rows, t);
      t = time_rot(sets, packs, [&](Set s, cudaStream_t st) { tma_rows<true><<<unsigned(rows), th, P * 16, st>>>(s.x, s.y, P); }, bad, "tma_bst", &ok);
      wrong += !ok; row("tma_bst", th, rows, t);
    }
    for (int th : {256, 512}) {
      int blocks;
      double t;
#define PERS(NB, DYN, NAME)                                                                                    \
      pers_setup<NB, DYN>(P, th, &blocks);                                                                     \
      if (blocks > 0) {                                                                                        \
        t = time_rot(sets, packs, [&](Set s, cudaStream_t st) {                                                \
          pers_rows<NB, DYN><<<blocks, th, NB * P * 16, st>>>(s.x, s.y, P, int(rows), next, done); }, bad, NAME, &ok); \
        wrong += !ok; row(NAME, th, blocks, t);                                                                \
      }
      PERS(2, true, "persd2") PERS(3, true, "persd3") PERS(4, true, "persd4") PERS(2, false, "perss2") PERS(3, false, "perss3")
    }
  }
  printf("# outputs wrong: %d kernels\n", wrong);
  return wrong != 0;
}
