// Matrix-vector product y = A x, A: M x K row-major f32 (CATALOG §5, seed 002 "sgemv").
// One template covers every variant: LANES = lanes per row (32: one warp per row, 16: two rows
// per warp), VEC = floats per load (4: float4).
//   k32   LANES=32 VEC=1  one warp per row, one float per lane per step
//   k128  LANES=32 VEC=4  one warp per row, one float4 (128-bit) per lane per step
//   k16   LANES=16 VEC=1  two rows per warp (half-warp per row), for small K
//   k16x4 LANES=4  VEC=4  beyond the seed: eight rows per warp, 4 lanes x float4 per row, so one
//                         warp load covers 512 contiguous bytes when K = 16 (k16 covers 128)
// Any M and K (the seed assumed K a multiple of 32 / 128 / exactly 16): lanes stride over the
// row and the tail is just fewer iterations. The float4 paths (k128, k16x4) need K % 4 == 0 and A, x
// 16-byte aligned (then every row start is aligned); otherwise the VEC=1 kernel runs and the
// launcher returns LK_PATH_FALLBACK.
#include "labkit.cuh"

__device__ __forceinline__ float dot(float a, float b) { return a * b; }
__device__ __forceinline__ float dot(float4 a, float4 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

constexpr int SGEMV_THREADS = 256;

template <int LANES, int VEC>
__global__ void __launch_bounds__(SGEMV_THREADS)
sgemv_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int M, int K) {
  using V = std::conditional_t<VEC == 4, float4, float>;
  constexpr int U = 4;  // independent loads in flight per lane: memory-level parallelism
  const int lane = threadIdx.x % LK_WARP, sub = lane % LANES;
  const int64_t row = (int64_t(blockIdx.x) * (SGEMV_THREADS / LK_WARP) + threadIdx.x / LK_WARP) * (LK_WARP / LANES)
                      + lane / LANES;
  float sum = 0.f;
  if (row < M) {  // no early return: k16's other half-warp may have a valid row and needs the shuffles
    const V* a = reinterpret_cast<const V*>(A + row * K);
    const V* xv = reinterpret_cast<const V*>(x);
    const int n = K / VEC;  // exact: VEC == 4 only runs with K % 4 == 0
    int k = sub;
    for (; k + (U - 1) * LANES < n; k += U * LANES) {
      V ra[U], rx[U];
#pragma unroll
      for (int u = 0; u < U; ++u) { ra[u] = a[k + u * LANES]; rx[u] = xv[k + u * LANES]; }
#pragma unroll
      for (int u = 0; u < U; ++u) sum += dot(ra[u], rx[u]);
    }
    for (; k < n; k += LANES) sum += dot(a[k], xv[k]);
  }
  sum = warp_reduce_sum<LANES>(sum);  // xor masks < LANES stay inside the row's lane group
  if (row < M && sub == 0) y[row] = sum;
}

template <int LANES, int VEC>
static void launch_sgemv(const float* A, const float* x, float* y, int M, int K, cudaStream_t stream) {
  constexpr int rows_per_block = SGEMV_THREADS / LANES;
  sgemv_kernel<LANES, VEC><<<ceil_div(M, rows_per_block), SGEMV_THREADS, 0, stream>>>(A, x, y, M, K);
}

template <int LANES, int VEC>
static int run_sgemv(const lk_args* args, cudaStream_t stream) {
  const float* A = lk_ptr<const float>(args->t[0]);
  const float* x = lk_ptr<const float>(args->t[1]);
  float* y = lk_ptr<float>(args->t[2]);
  const int M = int(args->t[0].size[0]), K = int(args->t[0].size[1]);
  if constexpr (VEC > 1) {
    const bool vec = K % VEC == 0 && reinterpret_cast<uintptr_t>(A) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(x) % 16 == 0;
    if (!vec) {
      launch_sgemv<LANES, 1>(A, x, y, M, K, stream);
      return lk_launch_status(LK_PATH_FALLBACK);
    }
  }
  launch_sgemv<LANES, VEC>(A, x, y, M, K, stream);
  return lk_launch_status();
}

LK_EXPORT int sgemv_k32(const lk_args* a, cudaStream_t s) { return run_sgemv<32, 1>(a, s); }
LK_EXPORT int sgemv_k128(const lk_args* a, cudaStream_t s) { return run_sgemv<32, 4>(a, s); }
LK_EXPORT int sgemv_k16(const lk_args* a, cudaStream_t s) { return run_sgemv<16, 1>(a, s); }
LK_EXPORT int sgemv_k16x4(const lk_args* a, cudaStream_t s) { return run_sgemv<4, 4>(a, s); }
