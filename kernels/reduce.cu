// Block all-reduce sum, y = sum(x) as one f32 (CATALOG §4, seed 002). T = input type (always
// accumulated in f32), N = elements per pack, ACCESS = bytes per load.
//   f32 / f16 / bf16            reduce_sum_kernel<T, 1, sizeof(T)>: one element per load
//   f32x4 / f16x8_pack / ...    reduce_sum_kernel<T, N, 16>: one 128-bit pack per load
//   f32x4_1pass / f16x8_1pass / bf16x8_1pass   reduce_sum_1pass<T, N, 4>: one launch, no atomics
// reduce_sum_kernel: grid-stride, U packs in flight per thread per step, block_reduce_sum, one
// atomicAdd per block into y (zeroed first on the same stream: a second launch). Unlike the seed
// (one element per thread, one atomic per 128 elements, vec4 load before the bounds check), the
// grid is capped at what the GPU holds at once: one atomic per resident block.
// reduce_sum_1pass: what held the pack kernel at 86-91 % of the copy peak at 128 MiB: a grid of
// 8 blocks per SM where 40 registers fit 6 (a 25 %-full second wave), a remainder loop that waits
// one memory latency per pack, 1056 float atomics on y queued at the end, and the memset launched
// before it. Here the grid is counted from the kernel's occupancy (lk_grid.cuh) in 1024-thread
// blocks, every round's U loads are issued before any add (the last round's clamped), and the
// last block adds the blocks' partial sums (lk_grid.cuh), in block order.
// Any n and alignment: scalar head + packs + scalar tail (a single input pointer never needs the
// scalar fallback kernel: the head always realigns it).
#include "labkit.cuh"
#include "lk_grid.cuh"

constexpr int kThreads = 256;
// one-pass kernels: 1024-thread blocks, 2 per SM (264 on 132 SMs): every block's ticket is an atomic
// on one address at the end of the kernel, where they queue; 1056 blocks of 256 queued 4x longer
constexpr int kOnePassThreads = 1024;

template <typename T, int N>
__device__ __forceinline__ float pack_sum(const Pack<T, N>& p) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += lk_to_float(p.elem[i]);
  return s;
}

template <typename T, int N, int ACCESS>
__global__ void __launch_bounds__(kThreads) reduce_sum_kernel(const T* __restrict__ x, float* __restrict__ y,
                                                              lk_split s) {
  // ~64 bytes of loads in flight per thread before the first add needs them
  constexpr int U = sizeof(Pack<T, N>) >= 16 ? 4 : 16;
  __shared__ float scratch[32];
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const T* xp = x + s.head;
  float acc = 0.f;
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // U whole packs, all in bounds
    Pack<T, N> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<ACCESS>(r[u], xp + (p + u * stride) * N);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += pack_sum(r[u]);
  }
  for (; p < s.packs; p += stride) {
    Pack<T, N> r;
    lk_load<ACCESS>(r, xp + p * N);
    acc += pack_sum(r);
  }
  if (t < s.head + s.tail) acc += lk_to_float(x[lk_edge_index(s, N, t)]);  // scalar edges
  acc = block_reduce_sum<kThreads>(acc, scratch);
  if (threadIdx.x == 0) atomicAdd(y, acc);
}

// One launch: U packs per thread per round, all U loads issued before the first add, two f32
// accumulators, then the grid finish. The last, partial round loads clamped indices (in bounds)
// and zeroes the extra packs' bits after: with guarded loads or guarded adds, nvcc put adds
// between the loads (or a load inside its add's branch), each waiting for a memory latency.
template <typename T, int N>
__device__ __forceinline__ void add_pack(float (&acc)[2], const Pack<T, N>& r) {
  float f[N];
  to_floats(f, r);
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k % 2] += f[k];
}

// blocks per SM the one-pass kernel is compiled for: 2 (32 registers) while U packs fit in them
template <int U> constexpr int kOnePassBlocks = U <= 4 ? 2048 / kOnePassThreads : 1024 / kOnePassThreads;

template <typename T, int N, int U>
__global__ void __launch_bounds__(kOnePassThreads, kOnePassBlocks<U>) reduce_sum_1pass(const T* __restrict__ x,
                                                                                    float* __restrict__ y, int slot,
                                                                                    lk_split s) {
  __shared__ float scratch[32];
  const int64_t t = int64_t(blockIdx.x) * kOnePassThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kOnePassThreads;
  const T* xp = x + s.head;
  float acc[2] = {0.f, 0.f};
  int64_t p = t;
  for (; p + (U - 1) * stride < s.packs; p += U * stride) {  // whole rounds
    Pack<T, N> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) lk_load<sizeof(r[u])>(r[u], xp + (p + u * stride) * N);
#pragma unroll
    for (int u = 0; u < U; ++u) add_pack(acc, r[u]);
  }
  if (p < s.packs) {  // the last round: packs p, p + stride, ... up to s.packs
    Pack<T, N> r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t q = p + u * stride;
      lk_load<sizeof(r[u])>(r[u], xp + (q < s.packs ? q : p) * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t keep = p + u * stride < s.packs ? ~0u : 0u;
      uint32_t* bits = reinterpret_cast<uint32_t*>(&r[u]);
#pragma unroll
      for (int k = 0; k < int(sizeof(r[u]) / 4); ++k) bits[k] &= keep;
      add_pack(acc, r[u]);
    }
  }
  if (t < s.head + s.tail) acc[0] += lk_to_float(x[lk_edge_index(s, N, t)]);  // scalar edges
  const float block_sum = block_reduce_sum<kOnePassThreads>(acc[0] + acc[1], scratch);
  float total;
  if (lk_last_block_sum<kOnePassThreads>(block_sum, slot, scratch, total) && threadIdx.x == 0) *y = total;
}

template <typename T, int N, int ACCESS>
static int launch_reduce(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  float* y = lk_ptr<float>(args->t[1]);
  const int64_t n = args->t[0].numel;
  const void* ptrs[1] = {x};
  const lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 1);
  cudaMemsetAsync(y, 0, sizeof(float), stream);  // the blocks accumulate into y
  const int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, kThreads);
  const int64_t cap = resident_blocks(kThreads);
  reduce_sum_kernel<T, N, ACCESS><<<int(blocks < cap ? blocks : cap), kThreads, 0, stream>>>(x, y, s);
  return lk_launch_status();
}

// The grid: no more blocks than full rounds of work, at most what the GPU holds at once (and the
// partial sums' slots, lk_grid.cuh).
template <typename T, int N, int U>
static int launch_reduce_1pass(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  float* y = lk_ptr<float>(args->t[1]);
  const void* ptrs[1] = {x};
  const lk_split s = lk_make_split(args->t[0].numel, N, sizeof(T), ptrs, 1);
  int64_t blocks = ceil_div<int64_t>(s.packs > 0 ? s.packs : 1, int64_t(kOnePassThreads) * U);
  const int64_t cap = lk_resident_grid<reduce_sum_1pass<T, N, U>>(kOnePassThreads);
  blocks = blocks < cap ? blocks : cap;
  blocks = blocks < LK_GRID_BLOCKS ? blocks : LK_GRID_BLOCKS;
  reduce_sum_1pass<T, N, U><<<int(blocks), kOnePassThreads, 0, stream>>>(x, y, lk_grid_slot(stream), s);
  return lk_launch_status();
}

using bf16 = __nv_bfloat16;

// The exported launchers (`int reduce_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/reduce.py (labkit.build.export_source): `labkit list` prints them.
