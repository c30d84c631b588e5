// Matrix-vector product y = A x, A: M x K row-major f32 (CATALOG §5, seed 002 "sgemv").
// One template covers every variant: LANES = lanes per row (32: one warp per row, 16: two rows
// per warp), VEC = floats per load (4: float4).
//   k32   LANES=32 VEC=1  one warp per row, one float per lane per step
//   k128  LANES=32 VEC=4  one warp per row, one float4 (128-bit) per lane per step
//   k16   LANES=16 VEC=1  two rows per warp (half-warp per row), for small K
//   k16x4 LANES=4  VEC=4  beyond the seed: eight rows per warp, 4 lanes x float4 per row, so one
//                         warp load covers 512 contiguous bytes when K = 16 (k16 covers 128);
//         R=4             and each lane group takes 4 rows 8 apart: 4 loads in flight per lane
// Any M and K (the seed assumed K a multiple of 32 / 128 / exactly 16): lanes stride over the
// row and the tail is just fewer iterations. The float4 paths (k128, k16x4) need K % 4 == 0 and A, x
// 16-byte aligned (then every row start is aligned); otherwise the VEC=1 kernel runs and the
// launcher returns LK_PATH_FALLBACK.
//   reference  labkit/ops/sgemv.py: A @ x in float64 (the variants' V(...) lines there; `labkit list sgemv`)
//   below      dot, sgemv_kernel, launch_sgemv / run_sgemv; the exported launchers are generated
#include "labkit.cuh"

// ---- kernel ---------------------------------------------------------------------------------------
__device__ __forceinline__ float dot(float a, float b) { return a * b; }
__device__ __forceinline__ float dot(float4 a, float4 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

constexpr int SGEMV_THREADS = 256;

// R = rows per lane group: a warp covers R x (32 / LANES) consecutive rows, and for small K
// every lane has R independent loads in flight (one per row) instead of one.
template <int LANES, int VEC, int R>
__global__ void __launch_bounds__(SGEMV_THREADS)
sgemv_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int M, int K) {
  using V = std::conditional_t<VEC == 4, float4, float>;
  constexpr int U = 4;                        // independent loads in flight per lane within a row
  constexpr int GROUPS = LK_WARP / LANES;     // rows side by side in one warp load
  const int lane = threadIdx.x % LK_WARP, sub = lane % LANES;
  const int64_t row0 = (int64_t(blockIdx.x) * (SGEMV_THREADS / LK_WARP) + threadIdx.x / LK_WARP) * GROUPS * R
                       + lane / LANES;
  const V* xv = reinterpret_cast<const V*>(x);
  const int n = K / VEC;  // exact: VEC == 4 only runs with K % 4 == 0
  float sum[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // no early return: the other lane groups of the warp may have valid rows and need the shuffles
    const int64_t row = row0 + r * GROUPS;
    sum[r] = 0.f;
    if (R == 1 && row < M) {
      const V* a = reinterpret_cast<const V*>(A + row * K);
      int k = sub;
      for (; k + (U - 1) * LANES < n; k += U * LANES) {
        V ra[U], rx[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { ra[u] = a[k + u * LANES]; rx[u] = xv[k + u * LANES]; }
#pragma unroll
        for (int u = 0; u < U; ++u) sum[r] += dot(ra[u], rx[u]);
      }
      for (; k < n; k += LANES) sum[r] += dot(a[k], xv[k]);
    }
  }
  if constexpr (R > 1) {  // k outer, rows inner: R loads (one per row) issued back to back
    for (int k = sub; k < n; k += LANES) {
      const V xk = xv[k];
      V ra[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (row0 + r * GROUPS < M) ra[r] = reinterpret_cast<const V*>(A + (row0 + r * GROUPS) * K)[k];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (row0 + r * GROUPS < M) sum[r] += dot(ra[r], xk);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    sum[r] = warp_reduce_sum<LANES>(sum[r]);  // xor masks < LANES stay inside the row's lane group
    if (row0 + r * GROUPS < M && sub == 0) y[row0 + r * GROUPS] = sum[r];
  }
}

// ---- launchers: t[0] = A (M x K), t[1] = x (K), t[2] = y (M) ---------------------------------------
template <int LANES, int VEC, int R>
static void launch_sgemv(const float* A, const float* x, float* y, int M, int K, cudaStream_t stream) {
  constexpr int rows_per_block = SGEMV_THREADS / LANES * R;
  sgemv_kernel<LANES, VEC, R><<<ceil_div(M, rows_per_block), SGEMV_THREADS, 0, stream>>>(A, x, y, M, K);
}

template <int LANES, int VEC, int R = 1>
static int run_sgemv(const lk_args* args, cudaStream_t stream) {
  const float* A = lk_ptr<const float>(args->t[0]);
  const float* x = lk_ptr<const float>(args->t[1]);
  float* y = lk_ptr<float>(args->t[2]);
  const int M = int(args->t[0].size[0]), K = int(args->t[0].size[1]);
  if constexpr (VEC > 1) {
    const bool vec = K % VEC == 0 && reinterpret_cast<uintptr_t>(A) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(x) % 16 == 0;
    if (!vec) {
      launch_sgemv<LANES, 1, R>(A, x, y, M, K, stream);
      return lk_launch_status(LK_PATH_FALLBACK);
    }
  }
  launch_sgemv<LANES, VEC, R>(A, x, y, M, K, stream);
  return lk_launch_status();
}

// The exported launchers (`int sgemv_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/sgemv.py (labkit.build.export_source): `labkit list` prints them.
