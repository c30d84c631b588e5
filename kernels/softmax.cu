// Softmax (CATALOG §4, seed 002), two ops in one file. Math is f32 for every storage type.
//
// Whole-vector softmax y = e^(x - max) / sum e^(x - max) over all n elements (op "softmax").
// The seed's single kernel (atomicAdd + __threadfence) races: a fence does not wait for the other
// blocks. Here two kernels do it: softmax_partials gives one (max, sum) pair per block (online
// softmax, grid-stride) and its last block merges them (a ticket, lk_grid.cuh); softmax_normalize
// writes y, 16 B a thread over a flat grid. x is read twice, y written once; the second pass takes
// its blocks last to first so the tail that the first pass read last is still in L2.
//   f32     N=1  ACCESS=4   one float per thread step
//   f32x4   N=4  ACCESS=16  one float4 per thread step (scalar head/tail for any n and offset)
//
// Row-wise softmax over N x K, softmax along K (op "softmax_rows", as models use it):
//   f32 / f16 / bf16         softmax_rows_online<T, 1>: block per row, online (max, sum) pass,
//                            then a normalize pass (re-reads the row, mostly from cache)
//   f32x4 / f16x8 / bf16x8   softmax_rows_reg: the row held in registers as f32 (lk_plan_row: a warp
//                            per row up to 16 (f32) or 32 (16-bit) floats a lane, else a block of
//                            <= 1024 (f32) or 256 (16-bit) threads), one read + one write, one exp an
//                            element; softmax_rows_smem (the row in shared memory; f16: two exps) for
//                            f32 K > 16384, 16-bit K > 8192 and 16-bit rows of 8-16 KiB (faster there);
//                            beyond the shared memory (f32 K > ~58000, 16-bit K > ~116000 on sm_90)
//                            softmax_rows_online in 16-byte packs. Rows not 16-byte aligned (K * itemsize
//                            % 16, or an offset view) run the scalar kernel (LK_PATH_FALLBACK).
// Reference: labkit/ops/softmax.py (x.softmax() in float64; the variants' V(...) lines). Below: helpers
// (lk_ex2_ftz; MS (max, sum) pairs: ms_merge / ms_push / warp_reduce_ms / block_reduce_ms), the vector
// kernels and launcher, then the row kernels and theirs. From labkit.cuh (the row plan norm.cu shares):
// lk_plan_row / lk_launch_smem_row / lk_with_packs, row_reduce, to_floats / from_floats, lk_cp_async16.
#include "labkit.cuh"
#include "lk_grid.cuh"

constexpr float LK_LOG2E = 1.4426950408889634f;
__device__ __forceinline__ float lk_ex2_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// ---- (max, sum of e^(x - max)) pairs: merging is associative, so any split works -----------
struct MS {
  float m, s;
};

__device__ __forceinline__ MS ms_merge(MS a, MS b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};  // both empty: avoid (-inf) - (-inf) = NaN
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

// Add N values to a running pair: one rescale per pack, one exp per element.
template <int N>
__device__ __forceinline__ void ms_push(MS& a, const float (&v)[N]) {
  float m = a.m;
#pragma unroll
  for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
  if (m == -INFINITY) return;  // nothing but -inf so far: contributes 0
  float s = a.s * __expf(a.m - m);
#pragma unroll
  for (int k = 0; k < N; ++k) s += __expf(v[k] - m);
  a = {m, s};
}

__device__ __forceinline__ MS warp_reduce_ms(MS v) {
#pragma unroll
  for (int o = LK_WARP / 2; o >= 1; o >>= 1)
    v = ms_merge(v, MS{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)});
  return v;
}

// Block-wide merge for any blockDim (labkit's block_reduce_* need a compile-time size).
__device__ __forceinline__ MS block_reduce_ms(MS v, MS* scratch) {
  const int warp = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;
  const int warps = (blockDim.x + LK_WARP - 1) / LK_WARP;
  v = warp_reduce_ms(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : MS{-INFINITY, 0.f};
  v = warp_reduce_ms(v);
  __syncthreads();
  return v;
}

// ================================ whole-vector softmax ========================================
constexpr int SM_THREADS = 256;
constexpr int SM_BLOCKS_PER_SM = 2048 / SM_THREADS;  // a full SM: the partials grid is exactly one wave
// partials: packs loaded before any math: 16-32 B in flight per thread, 32-64 KiB per SM (more
// spills under the 32-register cap that a full SM needs)
template <int N> constexpr int SM_UNROLL = N == 1 ? 4 : 2;
// normalize: packs per thread, 16 B of x each thread. One float4 a thread over as many blocks as
// it takes (the copy peak's shape) beat a one-wave grid-stride normalize by 3.6 % rotating, 2^26
// f32 on the H200 (logs/250b7aa/softmax-shape.log: 200.3 vs 207.8 us; 2 or 4 packs a thread 203-204)
template <int N> constexpr int SM_FLAT = N == 1 ? 4 : 1;

// One (max, sum) pair per block (online softmax, grid-stride, one wave); the block that takes the
// grid's last ticket (lk_grid.cuh: no second kernel, no memset) merges the pairs in block order
// into fin = (max, 1/sum) for the normalize pass.
template <typename T, int N, int ACCESS>
__global__ void __launch_bounds__(SM_THREADS, SM_BLOCKS_PER_SM) softmax_partials(const T* __restrict__ x,
                                                                                 float* __restrict__ part,
                                                                                 float* __restrict__ fin, int slot,
                                                                                 lk_split s) {
  __shared__ MS scratch[LK_WARP];
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  MS acc{-INFINITY, 0.f};
  for (int64_t p0 = t; p0 < s.packs; p0 += stride * SM_UNROLL<N>) {
    Pack<T, N> r[SM_UNROLL<N>];
#pragma unroll
    for (int u = 0; u < SM_UNROLL<N>; ++u)  // bounds check before every vector load
      if (p0 + u * stride < s.packs) lk_load<ACCESS>(r[u], x + s.head + (p0 + u * stride) * N);
#pragma unroll
    for (int u = 0; u < SM_UNROLL<N>; ++u)
      if (p0 + u * stride < s.packs) {
        float f[N];
        to_floats(f, r[u]);
        ms_push(acc, f);
      }
  }
  if (t < s.head + s.tail) {  // scalar edges
    const float f[1] = {lk_to_float(x[lk_edge_index(s, N, t)])};
    ms_push(acc, f);
  }
  acc = block_reduce_ms(acc, scratch);
  if (threadIdx.x == 0) part[2 * blockIdx.x] = acc.m, part[2 * blockIdx.x + 1] = acc.s;
  if (!lk_last_block(slot)) return;
  MS m{-INFINITY, 0.f};
  for (int i = threadIdx.x; i < int(gridDim.x); i += blockDim.x) m = ms_merge(m, MS{__ldcg(part + 2 * i), __ldcg(part + 2 * i + 1)});
  m = block_reduce_ms(m, scratch);
  if (threadIdx.x == 0) fin[0] = m.m, fin[1] = 1.f / m.s;
}

// y = e^(x - max) / sum: SM_FLAT<N> packs a thread, blocks taken last to first, so the vector's
// tail, which the partials pass read last, is read again first (while it is in L2). x is loaded
// before fin: those loads do not wait for it.
template <typename T, int N, int ACCESS>
__global__ void __launch_bounds__(SM_THREADS) softmax_normalize(const T* __restrict__ x, T* __restrict__ y,
                                                                const float* __restrict__ fin, lk_split s) {
  constexpr int PT = SM_FLAT<N>;
  const int64_t base = (int64_t(gridDim.x) - 1 - blockIdx.x) * SM_THREADS * PT + threadIdx.x;
  Pack<T, N> r[PT];
#pragma unroll
  for (int u = 0; u < PT; ++u)
    if (base + u * SM_THREADS < s.packs) lk_load<ACCESS>(r[u], x + s.head + (base + u * SM_THREADS) * N);
  const float mx = fin[0], inv = fin[1];
#pragma unroll
  for (int u = 0; u < PT; ++u)
    if (base + u * SM_THREADS < s.packs) {
      Pack<T, N> o;
#pragma unroll
      for (int k = 0; k < N; ++k) o.elem[k] = lk_from_float<T>(__expf(lk_to_float(r[u].elem[k]) - mx) * inv);
      lk_store<ACCESS>(y + s.head + (base + u * SM_THREADS) * N, o);
    }
  const int64_t t = int64_t(blockIdx.x) * SM_THREADS + threadIdx.x;
  if (t < s.head + s.tail) {
    const int64_t i = lk_edge_index(s, N, t);
    y[i] = lk_from_float<T>(__expf(lk_to_float(x[i]) - mx) * inv);
  }
}

// t[0] = x, t[1] = y, t[2] = f32 scratch: fin = (max, 1/sum) in its first 2 floats, then the
// per-block (max, sum) pairs (any alignment: read as floats). Partials blocks are capped by it too.
template <typename T, int N, int ACCESS>
static void softmax_pair(const T* x, T* y, float* scratch, int64_t blocks, lk_split s, cudaStream_t stream) {
  // the ticket is the module's device memory: the kernel takes its address, the host only the slot
  softmax_partials<T, N, ACCESS><<<blocks, SM_THREADS, 0, stream>>>(x, scratch + 2, scratch, lk_grid_slot(stream), s);
  int64_t grid = ceil_div<int64_t>(s.packs, int64_t(SM_THREADS) * SM_FLAT<N>);
  const int64_t edges = ceil_div<int64_t>(s.head + s.tail, SM_THREADS);  // the edges' threads, counted from block 0
  grid = grid > edges ? grid : edges;
  softmax_normalize<T, N, ACCESS><<<grid > 0 ? grid : 1, SM_THREADS, 0, stream>>>(x, y, scratch, s);
}

template <typename T, int N, int ACCESS>
static int launch_softmax(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  T* y = lk_ptr<T>(args->t[1]);
  float* scratch = lk_ptr<float>(args->t[2]);
  const int64_t n = args->t[1].numel;
  const void* ptrs[2] = {x, y};
  lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 2);
  int path = LK_PATH_VECTOR;
  if (!s.vector) {
    s = lk_make_split(n, 1, sizeof(T), ptrs, 2);
    path = LK_PATH_FALLBACK;
  }
  // enough partials blocks to fill the GPU once, no more than the scratch holds pairs for
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  const int64_t one_wave = int64_t(lk_sm_count()) * SM_BLOCKS_PER_SM;
  int64_t blocks = ceil_div<int64_t>(work > 0 ? work : 1, SM_THREADS);
  blocks = blocks < one_wave ? blocks : one_wave;
  blocks = blocks < (args->t[2].numel - 2) / 2 ? blocks : (args->t[2].numel - 2) / 2;
  if (path == LK_PATH_FALLBACK)
    softmax_pair<T, 1, sizeof(T)>(x, y, scratch, blocks, s, stream);
  else
    softmax_pair<T, N, ACCESS>(x, y, scratch, blocks, s, stream);
  return lk_launch_status(path);
}

// ================================== row-wise softmax ==========================================
// Row in registers as f32: PACKS packs of VEC elements per thread, a warp (WARP_ROW) or the block
// per row. One exp per element: e^(x - max) replaces x in place.
template <typename T, int VEC, int PACKS, bool WARP_ROW>
__global__ void __launch_bounds__(LK_ROW_THREADS) softmax_rows_reg(const T* __restrict__ x, T* __restrict__ y,
                                                        int64_t rows, int K) {
  __shared__ float scratch[LK_WARP];
  const auto [row, tid, nthr, xr, yr] = lk_row_at<WARP_ROW>(x, y, K);
  if (WARP_ROW && row >= rows) return;  // whole warps only: no block barrier in warp mode
  Pack<T, VEC> r[PACKS];
  lk_row_load(r, xr, tid, nthr, K);
  // per-pack partial max and sum (two accumulators each), packs combined at the end: short
  // dependency chains (one chain through a thread's 32 values ran f16 rows at 86-90 % of peak)
  float v[PACKS][VEC], pm[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    pm[p] = -INFINITY;
    if ((p * nthr + tid) * VEC < K) {
      to_floats(v[p], r[p]);
      float m0 = fmaxf(v[p][0], v[p][1]), m1 = fmaxf(v[p][2], v[p][3]);
#pragma unroll
      for (int k = 4; k < VEC; k += 2) m0 = fmaxf(m0, v[p][k]), m1 = fmaxf(m1, v[p][k + 1]);
      pm[p] = fmaxf(m0, m1);
    }
  }
  float mx = pm[0];
#pragma unroll
  for (int p = 1; p < PACKS; ++p) mx = fmaxf(mx, pm[p]);
  mx = row_reduce<WARP_ROW, true>(mx, scratch);
  // e^(x - mx) = 2^(x log2 e - mx log2 e): one FFMA + MUFU.EX2 per element (ftz: results below
  // 2^-126 are 0, far under any output's resolution)
  const float off = -mx * LK_LOG2E;
  float ps[PACKS];
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    ps[p] = 0.f;
    if ((p * nthr + tid) * VEC < K) {
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        v[p][k] = lk_ex2_ftz(fmaf(v[p][k], LK_LOG2E, off));
        if (k % 2) s1 += v[p][k];
        else s0 += v[p][k];
      }
      ps[p] = s0 + s1;
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) sum += ps[p];
  const float inv = 1.f / row_reduce<WARP_ROW, false>(sum, scratch);
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int c = (p * nthr + tid) * VEC;
    if (c < K) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] *= inv;
      Pack<T, VEC> o;
      from_floats(o, v[p]);
      lk_store<16>(yr + c, o);
    }
  }
}

// Rows too long for registers: the row in shared memory as stored (lk_plan_row's smem plan),
// three passes over it (max; e^x and sum; e^x * 1/sum, stored): one exp per element for f32 and
// bf16 rows (e^x kept in shared memory), two for f16.
// The copy-in and the passes are written out here, where norm_rows_smem takes them from labkit.cuh
// (lk_smem_row_load, lk_smem_row_pass): through those helpers ptxas reordered this kernel's max pass
// (commit 10ace29 put the written-out form back). Fold the helpers in only with a GPU to check and time both.
template <typename T, int VEC>
__global__ void __launch_bounds__(LK_SMEM_ROW_THREADS) softmax_rows_smem(const T* __restrict__ x, T* __restrict__ y,
                                                                     int K) {
  __shared__ float scratch[LK_WARP];
  T* s = reinterpret_cast<T*>(lk_dyn_smem);
  const T* xr = x + int64_t(blockIdx.x) * K;
  T* yr = y + int64_t(blockIdx.x) * K;
  const int P = K / VEC;  // K % VEC == 0
  for (int p = threadIdx.x; p < P; p += blockDim.x) lk_cp_async16(s + p * VEC, xr + p * VEC);
  lk_cp_async_wait_all();  // each thread re-reads only the packs it copied
  float m0 = -INFINITY, m1 = -INFINITY;
  if constexpr (std::is_same_v<T, float>) {
    for (int p = threadIdx.x; p < P; p += blockDim.x)
      for (int k = 0; k < VEC; k += 2) m0 = fmaxf(m0, s[p * VEC + k]), m1 = fmaxf(m1, s[p * VEC + k + 1]);
  } else {  // 16-bit rows: max of pairs as stored (exact), 7 instructions a pack, not 21 (H200, K = 50000)
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    T2 a = T2{lk_from_float<T>(-INFINITY), lk_from_float<T>(-INFINITY)}, b = a;
    for (int p = threadIdx.x; p < P; p += blockDim.x)
      for (int k = 0; k < VEC / 2; k += 2) a = __hmax2(a, reinterpret_cast<const T2*>(s + p * VEC)[k]),
                                          b = __hmax2(b, reinterpret_cast<const T2*>(s + p * VEC)[k + 1]);
    a = __hmax2(a, b), m0 = lk_to_float(a.x), m1 = lk_to_float(a.y);
  }
  const float off = -row_reduce<false, true>(fmaxf(m0, m1), scratch) * LK_LOG2E;
  // f32, bf16: e^(x - max) replaces x in shared memory, one exp per element. With two, a bf16 row
  // of 50000 computed for 3.2 us (2 x 50000 / 16 exps a clock), as long as the SM's other block
  // takes to load its row on an H200: between them no loads were in flight (91 % of the peak).
  // bf16's second rounding of e stays under 8e-3; f16's 1e-3 has no room for it: e again.
  constexpr bool KEEP_E = !std::is_same_v<T, __half>;
  float s0 = 0.f, s1 = 0.f;
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    float v[VEC];
    to_floats(v, *reinterpret_cast<const Pack<T, VEC>*>(s + p * VEC));
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      v[k] = lk_ex2_ftz(fmaf(v[k], LK_LOG2E, off));
      if (k % 2) s1 += v[k];
      else s0 += v[k];
    }
    if constexpr (KEEP_E) from_floats(*reinterpret_cast<Pack<T, VEC>*>(s + p * VEC), v);
  }
  const float inv = 1.f / row_reduce<false, false>(s0 + s1, scratch);
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    float v[VEC];
    to_floats(v, *reinterpret_cast<const Pack<T, VEC>*>(s + p * VEC));
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = (KEEP_E ? v[k] : lk_ex2_ftz(fmaf(v[k], LK_LOG2E, off))) * inv;
    Pack<T, VEC> o;
    from_floats(o, v);
    lk_store<16>(yr + p * VEC, o);
  }
}

// Any K: a block per row, online (max, sum) pass then a normalize pass. VEC = 1 is the scalar
// kernel (any alignment); VEC > 1 needs 16-byte aligned rows.
template <typename T, int VEC>
__global__ void __launch_bounds__(512) softmax_rows_online(const T* __restrict__ x, T* __restrict__ y, int K) {
  __shared__ MS scratch[LK_WARP];
  const T* xr = x + int64_t(blockIdx.x) * K;
  T* yr = y + int64_t(blockIdx.x) * K;
  MS acc{-INFINITY, 0.f};
#pragma unroll 4
  for (int c = threadIdx.x * VEC; c < K; c += blockDim.x * VEC) {
    Pack<T, VEC> r;
    lk_load<VEC * sizeof(T)>(r, xr + c);
    float f[VEC];
    to_floats(f, r);
    ms_push(acc, f);
  }
  acc = block_reduce_ms(acc, scratch);
  const float mx = acc.m, inv = 1.f / acc.s;
  lk_row_map<T, VEC>(xr, yr, K, [=](float v) { return __expf(v - mx) * inv; });
}

template <typename T, int VEC>
static void launch_online(const T* x, T* y, int64_t rows, int K, cudaStream_t stream) {
  int threads = ceil_div(K / VEC, LK_WARP) * LK_WARP;
  threads = threads < 512 ? threads : 512;
  softmax_rows_online<T, VEC><<<rows, threads, 0, stream>>>(x, y, K);
}

// VEC-wide rows, 16-byte aligned: in registers or shared memory (lk_plan_row), or streamed.
// FLOATS (row values per thread) and THREADS (most threads per row) are tuning axes; 0 = the
// measured default: f32 16 floats (32 left f32x4 at 65-86 % of peak), <= 1024 threads; 16-bit
// <= 256 threads (K = 16384 in registers: 512 threads x 4 packs took 72.0 us on an H200,
// 1024 x 2 took 71.6, shared memory 69.3), 16 floats up to K = 2048 and 32 above (at K = 1024, 16
// gives 64-thread blocks where 32 gives a warp a row): the sweep tune-softmax-floats is the evidence
// (results/<gpu>/tune-softmax-floats.jsonl, README).
template <typename T, int VEC, int FLOATS, int THREADS>
static void launch_rows_vec(const T* x, T* y, int64_t rows, int K, cudaStream_t stream) {
  constexpr bool F32 = std::is_same_v<T, float>;
  static_assert(FLOATS == 0 || (FLOATS >= VEC && FLOATS <= LK_ROW_FLOATS_MAX), "FLOATS: 0, or VEC .. LK_ROW_FLOATS_MAX");
  const int floats = FLOATS ? FLOATS : F32 ? 16 : K <= 2048 ? 16 : 32;
  constexpr int threads = THREADS ? THREADS : (F32 ? LK_ROW_THREADS : 256);
  const int64_t row_bytes = int64_t(K) * sizeof(T);
  // 16-bit rows of 8-16 KiB in shared memory (64-128 threads a row), not a register block of 128-256: on an
  // H200, rotating, 16384x4096 65.9 -> 65.4 us, 65536x4096 258.7 -> 256.5; at 8192x8192 the smem plan's
  // 128 threads were 1.1 % slower than 256 x 4 packs in registers (results/nvidia-h200/logs/1aa81838dd4f/call3/)
  const lk_row_plan plan = lk_plan_row(K / VEC, VEC, floats, threads, row_bytes, F32 ? 0 : 8 << 10, 16 << 10);
  if (plan.smem) return lk_launch_smem_row(softmax_rows_smem<T, VEC>, rows, plan.threads, row_bytes, stream, x, y, K);
  if (plan.packs == 0) return launch_online<T, VEC>(x, y, rows, K, stream);
  const int64_t blocks = plan.warp ? ceil_div<int64_t>(rows, LK_ROWS_PER_BLOCK) : rows;
  lk_with_packs<VEC>(plan.packs, [&](auto packs) {
    constexpr int PACKS = decltype(packs)::value;
    if (plan.warp) softmax_rows_reg<T, VEC, PACKS, true><<<blocks, plan.threads, 0, stream>>>(x, y, rows, K);
    else softmax_rows_reg<T, VEC, PACKS, false><<<blocks, plan.threads, 0, stream>>>(x, y, rows, K);
  });
}

// t[0] = x (N x K), t[1] = y. VEC = 1: the scalar variant.
template <typename T, int VEC, int FLOATS, int THREADS>
static int launch_softmax_rows(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  T* y = lk_ptr<T>(args->t[1]);
  const lk_tensor& tx = args->t[0];
  const int K = int(tx.ndim > 0 ? tx.size[tx.ndim - 1] : 1);
  const int64_t rows = K > 0 ? tx.numel / K : 0;
  if (rows == 0) return lk_launch_status();
  const bool aligned = (int64_t(K) * sizeof(T)) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if constexpr (VEC == 1) {
    launch_online<T, 1>(x, y, rows, K, stream);
    return lk_launch_status();
  } else {
    if (!aligned) {
      launch_online<T, 1>(x, y, rows, K, stream);
      return lk_launch_status(LK_PATH_FALLBACK);
    }
    launch_rows_vec<T, VEC, FLOATS, THREADS>(x, y, rows, K, stream);
    return lk_launch_status();
  }
}

// The exported launchers (`int softmax_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/softmax.py (labkit.build.export_source): `labkit list` prints them.
