// Elementwise add, c = a + b (CATALOG §1, seed 000). One template carries the whole lesson:
// T = element type, N = elements per thread, ACCESS = bytes per memory instruction. N=8 with
// ACCESS=4 is the seed's "method 1" (four half2 accesses, lanes 16 B apart), N=8 with ACCESS=16
// its "method 2" (one 128-bit access); BLOCK (threads per block) is a tuning axis.
// Any n and any alignment: scalar head + packs + scalar tail, or the scalar kernel when the
// three pointers are misaligned differently (reported as LK_PATH_FALLBACK).
//   variants   f32 f32x4 | f16 f16x2 f16x8 f16x8_pack | bf16 bf16x2 bf16x8_pack: the dtype and N (x4, x8);
//              one access per pack, except f16x8 (method 1: ACCESS = 4). The V(...) lines of labkit/ops/add.py
//              hold them, `labkit list add` prints them.
//   reference  labkit/ops/add.py: a + b in float64, rounded once to the storage type; torch.add the baseline
//   below      add_pack (one pack's math), add_kernel, launch_add; the exported launchers are generated
#include "labkit.cuh"

// ---- kernel ---------------------------------------------------------------------------------------
template <typename T, int N>
__device__ __forceinline__ void add_pack(Pack<T, N>& c, const Pack<T, N>& a, const Pack<T, N>& b) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int i = 0; i < N; ++i) c.elem[i] = a.elem[i] + b.elem[i];
  } else if constexpr (N % 2 == 0) {  // half / bf16: paired adds (__hadd2)
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
#pragma unroll
    for (int i = 0; i < N; i += 2)
      *reinterpret_cast<T2*>(&c.elem[i]) =
          __hadd2(*reinterpret_cast<const T2*>(&a.elem[i]), *reinterpret_cast<const T2*>(&b.elem[i]));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) c.elem[i] = __hadd(a.elem[i], b.elem[i]);
  }
}

template <typename T, int N, int ACCESS>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                           lk_split s) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < s.packs) {
    const int64_t i = s.head + t * N;
    Pack<T, N> ra, rb, rc;
    lk_load<ACCESS>(ra, a + i);
    lk_load<ACCESS>(rb, b + i);
    add_pack(rc, ra, rb);
    lk_store<ACCESS>(c + i, rc);
  }
  if (t < s.head + s.tail) {  // scalar edges
    const int64_t i = lk_edge_index(s, N, t);
    Pack<T, 1> ra{{a[i]}}, rb{{b[i]}}, rc;
    add_pack(rc, ra, rb);
    c[i] = rc.elem[0];
  }
}

// ---- launcher: t[0] = a, t[1] = b, t[2] = c --------------------------------------------------------
template <typename T, int N, int ACCESS, int BLOCK>
static int launch_add(const lk_args* args, cudaStream_t stream) {
  const T* a = lk_ptr<const T>(args->t[0]);
  const T* b = lk_ptr<const T>(args->t[1]);
  T* c = lk_ptr<T>(args->t[2]);
  const int64_t n = args->t[2].numel;
  const int threads = BLOCK;
  const void* ptrs[3] = {a, b, c};
  lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 3);
  if (!s.vector) {
    lk_split scalar = lk_make_split(n, 1, sizeof(T), ptrs, 3);
    add_kernel<T, 1, sizeof(T)><<<ceil_div<int64_t>(n, threads), threads, 0, stream>>>(a, b, c, scalar);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  const int64_t blocks = ceil_div<int64_t>(work > 0 ? work : 1, threads);
  add_kernel<T, N, ACCESS><<<blocks, threads, 0, stream>>>(a, b, c, s);
  return lk_launch_status();
}

// The exported launchers (`int add_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/add.py (labkit.build.export_source): `labkit list` prints them.
