// labkit's shared kernel header (no torch), llm.c's common.h in labkit's terms; from top to bottom:
//   launcher plumbing      LK_EXPORT, ceil_div, lk_launch_status, lk_ptr
//   Pack<T, N>             N elements in one aligned register block, moved by lk_load / lk_store<ACCESS>
//                          with memory instructions of ACCESS bytes each (the access width is a type parameter)
//   lk_split               scalar head | aligned packs | scalar tail of any n and alignment (lk_make_split,
//                          lk_edge_index), or "misaligned differently": the caller's scalar kernel
//   reductions             warp_reduce_sum / warp_reduce_max, block_reduce_sum<THREADS>
//   conversions            lk_to_float / lk_from_float<T>: storage type <-> f32 math
//   launch sizing          lk_device_attr (cached), lk_sm_count, resident_blocks (a grid-stride kernel's
//                          grid), lk_cc_major, lk_smem_optin
//   the row plan           lk_plan_row and what the row kernels of softmax.cu and norm.cu share:
//                          lk_launch_smem_row, lk_with_packs, lk_row_at / lk_row_load / lk_row_map,
//                          row_reduce, to_floats / from_floats, lk_cp_async16,
//                          lk_smem_row_load / lk_smem_row_pass
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <type_traits>
#include "lk_abi.h"

#define LK_EXPORT extern "C" __attribute__((visibility("default")))
#define LK_WARP 32

template <typename T>
__host__ __device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

// A launcher ends with this: the launch error (bad config, no device) as a negative code.
static inline int lk_launch_status(int path = LK_PATH_VECTOR) {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? path : -static_cast<int>(err);
}

template <typename T> __host__ __device__ __forceinline__ T* lk_ptr(const lk_tensor& t) {
  return static_cast<T*>(t.data);
}

// ---- Pack<T, N>: N elements in one aligned register block (seed 001's union Pack) ----------
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T elem[N];
};

// Unsigned type of exactly BYTES bytes: what one memory instruction of that width moves.
template <int BYTES> struct lk_word;
template <> struct lk_word<1> { using type = uint8_t; };
template <> struct lk_word<2> { using type = uint16_t; };
template <> struct lk_word<4> { using type = uint32_t; };
template <> struct lk_word<8> { using type = uint2; };
template <> struct lk_word<16> { using type = uint4; };

// Load/store a whole pack with accesses of ACCESS bytes each. ACCESS == sizeof(pack) gives one
// 128-bit LDG/STG for a 16-byte pack; a smaller ACCESS splits it (seed 000's "four half2").
template <int ACCESS, typename T, int N>
__device__ __forceinline__ void lk_load(Pack<T, N>& p, const T* src) {
  using W = typename lk_word<ACCESS>::type;
  constexpr int K = sizeof(Pack<T, N>) / ACCESS;
  static_assert(K * ACCESS == sizeof(Pack<T, N>), "access width must divide the pack");
  const W* s = reinterpret_cast<const W*>(src);
  W* d = reinterpret_cast<W*>(&p);
#pragma unroll
  for (int k = 0; k < K; ++k) d[k] = s[k];
}

template <int ACCESS, typename T, int N>
__device__ __forceinline__ void lk_store(T* dst, const Pack<T, N>& p) {
  using W = typename lk_word<ACCESS>::type;
  constexpr int K = sizeof(Pack<T, N>) / ACCESS;
  const W* s = reinterpret_cast<const W*>(&p);
  W* d = reinterpret_cast<W*>(dst);
#pragma unroll
  for (int k = 0; k < K; ++k) d[k] = s[k];
}

// ---- Split of [0, n) into scalar head | aligned packs | scalar tail --------------------------
// Vector accesses need every pointer aligned to the pack size. When all pointers share the same
// misalignment, a scalar head of `head` elements realigns them; otherwise vector = false and the
// launcher must run its scalar kernel (and report LK_PATH_FALLBACK).
struct lk_split {
  int64_t head, packs, tail;
  bool vector;
};

static inline lk_split lk_make_split(int64_t n, int pack_elems, int elem_bytes,
                                     const void* const* ptrs, int nptr) {
  const int64_t pack_bytes = int64_t(pack_elems) * elem_bytes;
  const int64_t off = reinterpret_cast<uintptr_t>(ptrs[0]) % pack_bytes;
  lk_split s{0, 0, n, true};
  for (int i = 0; i < nptr; ++i)
    if (int64_t(reinterpret_cast<uintptr_t>(ptrs[i]) % pack_bytes) != off) s.vector = false;
  if (off % elem_bytes != 0) s.vector = false;
  if (!s.vector) return s;
  int64_t head = off ? (pack_bytes - off) / elem_bytes : 0;
  if (head > n) head = n;
  s.head = head;
  s.packs = (n - head) / pack_elems;
  s.tail = n - head - s.packs * pack_elems;
  return s;
}

// Which scalar element an "edge" thread handles: edges are the head, then the tail.
__device__ __forceinline__ int64_t lk_edge_index(const lk_split& s, int pack_elems, int64_t j) {
  return j < s.head ? j : s.head + s.packs * pack_elems + (j - s.head);
}

// ---- Warp / block reductions (seed 002 helpers) -----------------------------------------------
template <int WIDTH = LK_WARP>
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int m = WIDTH >> 1; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

template <int WIDTH = LK_WARP>
__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
  for (int m = WIDTH >> 1; m >= 1; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Every thread of the block gets the block's sum. `scratch` holds >= 32 floats; the trailing
// barrier lets a caller reuse it immediately. (A runtime block size: row_reduce, below.)
template <int THREADS>
__device__ __forceinline__ float block_reduce_sum(float v, float* scratch) {
  constexpr int WARPS = (THREADS + LK_WARP - 1) / LK_WARP;
  const int warp = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;
  v = warp_reduce_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < WARPS ? scratch[lane] : 0.f;
  v = warp_reduce_sum(v);
  __syncthreads();
  return v;
}

// ---- Conversions between storage types and f32 math ------------------------------------------
__device__ __forceinline__ float lk_to_float(float x) { return x; }
__device__ __forceinline__ float lk_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float lk_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T lk_from_float(float x);
template <> __device__ __forceinline__ float lk_from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half lk_from_float<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 lk_from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}

// ---- Launch sizing and row helpers shared by the reduction / row-wise kernels -------------
// The current device's attribute A, cached per device (`fallback` where there is no device); no
// stream work, so the launch sizing below is safe in graph capture.
template <cudaDeviceAttr A>
static inline int lk_device_attr(int fallback) {
  static int value[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= 64) return fallback;
  if (!value[dev]) cudaDeviceGetAttribute(&value[dev], A, dev);
  return value[dev];
}

static inline int lk_sm_count() { return lk_device_attr<cudaDevAttrMultiProcessorCount>(132); }

// Blocks resident at once for `threads`-thread blocks (the grid of a grid-stride kernel).
static inline int resident_blocks(int threads) {
  const int per_sm = lk_device_attr<cudaDevAttrMaxThreadsPerMultiProcessor>(0);
  if (per_sm == 0) return 1024;
  const int k = per_sm / threads;
  return lk_sm_count() * (k > 0 ? k : 1);
}

// Compute capability major (9 on Hopper: programmatic launches, clusters).
static inline int lk_cc_major() { return lk_device_attr<cudaDevAttrComputeCapabilityMajor>(0); }

// Most dynamic shared memory one block may opt in to (227 KiB on sm_90, 163 KiB on sm_80).
static inline int lk_smem_optin() { return lk_device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 << 10); }

// How a row kernel covers a row of P packs of VEC elements (row_bytes in all):
//   warp   the row in registers, a warp per row (8 rows per block, no block barrier), while a
//          warp holds it with <= `floats` values per lane (converted to f32 at load: a 16-bit row
//          costs the same registers and instructions per element as an f32 one)
//   block  the row in registers, a block of <= max_threads threads per row
//   smem   longer rows: the row in shared memory as stored (cp.async, one 16-byte copy per pack),
//          re-read from there by each pass; 8 packs per thread, 64-512 threads. Registers stay
//          low, so 6-7 rows per SM have their loads in flight instead of 2 (H200, f16 rows of
//          16384: softmax 72.0 -> 69.3 us, layer_norm 71.8 -> 69.0; the copy kernel: 67.6).
//          8 packs a thread at 8 KiB rows too: a row copy with two block sums, 16384 x 4096 f16
//          rotating, ran 99.0 % of a flat copy's speed with 64 threads, 98.0 % with 128
//          (results/nvidia-h200/logs/c4698cfb989b/call2/rows-copy.log)
//   stream rows beyond the shared memory (packs = 0): the caller's two-pass streaming kernel
// floats and max_threads are per op and dtype, measured on an H200 at 256 MiB moved (softmax.cu,
// norm.cu): the same row shape ran one op at the copy peak and another at 65-80 % (compiled
// schedules differ), while a block-per-row copy (load, barrier, store) reached the peak at
// every shape.
constexpr int LK_ROW_FLOATS_MAX = 32;
constexpr int LK_ROW_THREADS = 1024;  // most threads of a block-per-row kernel
constexpr int LK_ROWS_PER_BLOCK = 8;  // warp mode
constexpr int LK_SMEM_ROW_THREADS = 512;
constexpr int LK_ROW_SCRATCH_BYTES = 1 << 10;  // most static shared memory a row kernel keeps beside the row
struct lk_row_plan {
  int packs;    // packs per thread (a power of two); 0: smem or stream
  bool warp;    // a warp per row
  bool smem;    // the row in shared memory
  int threads;  // block size
};
// [smem_from, smem_below): rows of that many bytes take the smem plan where a block would hold them
// in registers (smem_from 0: never; the caller's measurements say where it pays)
static inline lk_row_plan lk_plan_row(int P, int vec, int floats, int max_threads, int64_t row_bytes,
                                      int64_t smem_from = 0, int64_t smem_below = INT64_MAX) {
  const int pmax = floats / vec;
  for (int packs = 1; packs <= pmax; packs *= 2)
    if (P <= LK_WARP * packs) return {packs, true, false, LK_ROWS_PER_BLOCK * LK_WARP};
  const bool fits = row_bytes <= lk_smem_optin() - LK_ROW_SCRATCH_BYTES;
  const bool smem_first = fits && smem_from > 0 && row_bytes >= smem_from && row_bytes < smem_below;
  if (P <= max_threads * pmax && !smem_first)
    return {pmax, false, false, ceil_div(ceil_div(P, pmax), LK_WARP) * LK_WARP};
  if (fits) {
    const int t = ceil_div(ceil_div(P, 8), LK_WARP) * LK_WARP;
    return {0, false, true, t < 64 ? 64 : t > LK_SMEM_ROW_THREADS ? LK_SMEM_ROW_THREADS : t};
  }
  return {0, false, false, 0};
}

// The smem plan's launch: dynamic plus static shared memory above 48 KiB needs the kernel's opt-in
// first. The static scratch counts too: a 48 KiB row (f16, K = 24576) beside 128 B of scratch failed
// to launch when only rows above 48 KiB opted in.
template <typename Kernel, typename... Args>
static inline void lk_launch_smem_row(Kernel k, int64_t rows, int threads, int64_t row_bytes, cudaStream_t stream,
                                      Args... args) {
  if (row_bytes > (48 << 10) - LK_ROW_SCRATCH_BYTES)
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(row_bytes));
  k<<<rows, threads, row_bytes, stream>>>(args...);
}

// 16-byte global -> shared copies that skip the registers (cp.async, sm_80+); each thread's
// wait covers only its own copies, so a thread that re-reads just the packs it copied needs no
// barrier.
__device__ __forceinline__ void lk_cp_async16(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void lk_cp_async_wait_all() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
extern __shared__ __align__(16) unsigned char lk_dyn_smem[];

// Calls f(std::integral_constant<int, packs>) for a plan's packs, instantiating only the pack
// counts a VEC-wide row can use.
template <int VEC, typename F>
static inline void lk_with_packs(int packs, F&& f) {
  constexpr int PMAX = LK_ROW_FLOATS_MAX / VEC;
  if (packs == 1) f(std::integral_constant<int, 1>{});
  if constexpr (PMAX >= 2) if (packs == 2) f(std::integral_constant<int, 2>{});
  if constexpr (PMAX >= 4) if (packs == 4) f(std::integral_constant<int, 4>{});
  if constexpr (PMAX >= 8) if (packs == 8) f(std::integral_constant<int, 8>{});
}

// Where a register-plan row kernel's thread sits: its row (a warp's, or the block's), its index
// among the threads of that row, their number, and the row's start in x and y (K elements a row).
template <typename T>
struct lk_row_place {
  int64_t row;
  int tid, nthr;
  const T* x;
  T* y;
};
template <bool WARP_ROW, typename T>
__device__ __forceinline__ lk_row_place<T> lk_row_at(const T* x, T* y, int K) {
  const int64_t row = WARP_ROW ? int64_t(blockIdx.x) * (blockDim.x / LK_WARP) + threadIdx.x / LK_WARP : blockIdx.x;
  return {row, int(WARP_ROW ? threadIdx.x % LK_WARP : threadIdx.x), int(WARP_ROW ? LK_WARP : blockDim.x), x + row * K,
          y + row * K};
}

// The thread's PACKS packs of its row, every load issued before any math (PACKS x 16 B in flight);
// K % VEC == 0, packs past the row's end are left alone.
template <typename T, int VEC, int PACKS>
__device__ __forceinline__ void lk_row_load(Pack<T, VEC> (&r)[PACKS], const T* xr, int tid, int nthr, int K) {
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
    if ((p * nthr + tid) * VEC < K) lk_load<16>(r[p], xr + (p * nthr + tid) * VEC);
}

// Sum or max over a warp (WARP_ROW) or over the block, for any blockDim.
template <bool WARP_ROW, bool MAX>
__device__ __forceinline__ float row_reduce(float v, float* scratch) {
  v = MAX ? warp_reduce_max(v) : warp_reduce_sum(v);
  if constexpr (WARP_ROW) return v;
  const int warp = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;
  const int warps = (blockDim.x + LK_WARP - 1) / LK_WARP;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (MAX ? -INFINITY : 0.f);
  v = MAX ? warp_reduce_max(v) : warp_reduce_sum(v);
  __syncthreads();
  return v;
}

// Pack -> floats; 16-bit types convert in pairs from 32-bit words (per-element access of a
// register-held pack made ptxas spill bf16 halves to local memory).
template <typename T, int N>
__device__ __forceinline__ void to_floats(float (&f)[N], const Pack<T, N>& p) {
  if constexpr (std::is_same_v<T, float> || N % 2 != 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) f[k] = lk_to_float(p.elem[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; k += 2) {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(&p.elem[k]);
      if constexpr (std::is_same_v<T, __half>) {
        const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&w));
        f[k] = v.x, f[k + 1] = v.y;
      } else {  // bf16 -> f32 is exact: the high 16 bits of the float
        f[k] = __uint_as_float(w << 16), f[k + 1] = __uint_as_float(w & 0xffff0000u);
      }
    }
  }
}

template <typename T, int N>
__device__ __forceinline__ void from_floats(Pack<T, N>& p, const float (&f)[N]) {
  if constexpr (std::is_same_v<T, float> || N % 2 != 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) p.elem[k] = lk_from_float<T>(f[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; k += 2) {
      if constexpr (std::is_same_v<T, __half>) *reinterpret_cast<__half2*>(&p.elem[k]) = __floats2half2_rn(f[k], f[k + 1]);
      else *reinterpret_cast<__nv_bfloat162*>(&p.elem[k]) = __floats2bfloat162_rn(f[k], f[k + 1]);
    }
  }
}

// y = f(x) elementwise over one row, in f32, VEC-wide packs strided over the block: the streaming
// row kernels' last pass, after their reductions.
template <typename T, int VEC, typename F>
__device__ __forceinline__ void lk_row_map(const T* xr, T* yr, int K, F f) {
#pragma unroll 4
  for (int c = threadIdx.x * VEC; c < K; c += blockDim.x * VEC) {
    Pack<T, VEC> r, o;
    lk_load<VEC * sizeof(T)>(r, xr + c);
    float v[VEC];
    to_floats(v, r);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = f(v[k]);
    from_floats(o, v);
    lk_store<VEC * sizeof(T)>(yr + c, o);
  }
}

// ---- the smem plan's row (lk_plan_row): copied in as stored, then passes over it as f32 ---------
// Each thread copies the packs p = threadIdx.x, + blockDim.x, ... and re-reads only those, so its
// own cp.async wait is all the synchronization the row needs.
template <typename T, int VEC>
__device__ __forceinline__ void lk_smem_row_load(T* s, const T* row, int P) {
  for (int p = threadIdx.x; p < P; p += blockDim.x) lk_cp_async16(s + p * VEC, row + p * VEC);
  lk_cp_async_wait_all();
}

// f(p, v) for each of this thread's packs p, with v its VEC values as f32.
template <typename T, int VEC, typename F>
__device__ __forceinline__ void lk_smem_row_pass(const T* s, int P, F&& f) {
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    float v[VEC];
    to_floats(v, *reinterpret_cast<const Pack<T, VEC>*>(s + p * VEC));
    f(p, v);
  }
}
