// Matrix product C = A B, f32, row-major, A: M x K, B: K x N (CATALOG §5, seed 002 "sgemm").
// Reference: labkit/ops/sgemm.py::_reference (the float64 product); baseline: cuBLAS FP32, TF32 off.
// Each variant is one step from the seed towards cuBLAS FP32:
//   tiled32    seed "sgemm": 32x32 block of 1024 threads, one C element each, 32x32 smem tiles
//   tile128x8  seed "thread_tile_vec4": 128x128x8 block tile, 8x8 thread tile, float4 loads/stores
//              (no register cap: ~150 registers, so one 256-thread block per SM)
//   dbuf       tile128x8 + double-buffered smem and register prefetch of the next k-tile
//              (global loads overlap the FFMAs, one __syncthreads per k-tile instead of two),
//              registers capped at 128 for two blocks per SM
//   warptile   dbuf + warp tiling (warp = 64x32 of C, lane = 2x2 sub-tiles of 4x4), A stored
//              transposed in padded smem (conflict-free stores), float4 (LDS.128) fragment reads
//   warptile_async  warptile's tile, its copies by cp.async into 3 smem stages (no staging registers),
//              lanes interleaved by 2 (each LDS.128 in 2 wavefronts, not 4), fragments double-
//              buffered across tiles, blocks in groups of 8 tile rows (L2 reuse)
//   tuned      the same kernel, its tile (block, warp, thread, stages, group) a set of tuning axes;
//              by default the best tile of this GPU's tune-sgemm sweep (launch_by_gpu)
// Any M, N, K: every global load is guarded (zero fill past the edges) and every store guarded.
// The 128x128 kernels use float4 loads/stores when K % 4 == 0, N % 4 == 0 and A, B, C are
// 16-byte aligned (a float4 is then all in or all out of bounds); otherwise the same kernel with
// scalar accesses runs (VEC = false) and the launcher returns LK_PATH_FALLBACK. The async kernel
// needs only N % 4 == 0 and B, C aligned (it copies A 4 bytes at a time).
#include <string.h>

#include <type_traits>

#include "labkit.cuh"

// ---- guarded 4-element accesses: p[0..3], `ok` for the row, `valid` elements left in it -------
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* p, bool ok, int valid) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if constexpr (VEC) {
    if (ok && valid >= 4) v = __ldg(reinterpret_cast<const float4*>(p));
  } else if (ok) {
    if (valid > 0) v.x = __ldg(p);
    if (valid > 1) v.y = __ldg(p + 1);
    if (valid > 2) v.z = __ldg(p + 2);
    if (valid > 3) v.w = __ldg(p + 3);
  }
  return v;
}

template <bool VEC>
__device__ __forceinline__ void store4(float* p, bool ok, int valid, const float* v) {
  if constexpr (VEC) {
    if (ok && valid >= 4) *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (ok) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (i < valid) p[i] = v[i];
  }
}

// ---- tiled32: the seed's shared-memory tiled kernel, with bounds checks --------------------------
template <int T>
__global__ void __launch_bounds__(T * T)
sgemm_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
  __shared__ float sA[T][T], sB[T][T];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float sum = 0.f;
  for (int k0 = 0; k0 < K; k0 += T) {
    sA[ty][tx] = row < M && k0 + tx < K ? A[int64_t(row) * K + k0 + tx] : 0.f;
    sB[ty][tx] = k0 + ty < K && col < N ? B[int64_t(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < T; ++k) sum += sA[ty][k] * sB[k][tx];  // sA: broadcast, sB: one row
    __syncthreads();
  }
  if (row < M && col < N) C[int64_t(row) * N + col] = sum;
}

// ---- 128x128x8 block tile, 256 threads, 8x8 C elements per thread ---------------------------------
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;

// Tile loads shared by the 128x128 kernels: each thread moves one float4 of the A tile (row tid/2,
// k (tid%2)*4) and one of the B tile (k tid/32, column (tid%32)*4). Few live registers: the
// pointers advance with the k-tile, and "A row out of range" is folded into its count.
struct TileLoader {
  const float* a;  // A[gm][k0 + a_k]
  const float* b;  // B[k0 + b_k][gn]
  int a_left;      // elements of the A row left at k0 = 0 (0 when gm >= M: nothing to load)
  int b_rows;      // rows of B left at k0 = 0 (K - b_k)
  int b_valid;     // columns of B left in the row (N - gn)
  int a_r, a_k, b_k, b_n;

  __device__ TileLoader(const float* A, const float* B, int M, int N, int K, int tid) {
    a_r = tid >> 1; a_k = (tid & 1) << 2;
    b_k = tid >> 5; b_n = (tid & 31) << 2;
    const int gm = blockIdx.y * BM + a_r, gn = blockIdx.x * BN + b_n;
    a_left = gm < M ? K - a_k : 0;
    b_rows = K - b_k;
    b_valid = N - gn;
    a = A + int64_t(gm) * K + a_k;  // formed only; dereferenced when in bounds
    b = B + int64_t(b_k) * N + gn;
  }
  // Load k-tile k0 (tiles are visited in order: the pointers then move to the next one).
  template <bool VEC> __device__ __forceinline__ void load(int k0, int N, float4& va, float4& vb) {
    va = load4<VEC>(a, true, a_left - k0);
    vb = load4<VEC>(b, k0 < b_rows, b_valid);
    a += BK;
    b += int64_t(BK) * N;
  }
};

// Guarded 8x8 epilogue: rows r0 + rows[i], columns c0 + {0..3} and c0 + c1 + {0..3}.
template <bool VEC>
__device__ __forceinline__ void store_tile(float* C, const float (&acc)[TM][TN], int r0, const int (&rows)[TM],
                                           int c0, int c1, int M, int N) {
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = r0 + rows[i];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = c0 + h * c1;
      store4<VEC>(C + int64_t(r) * N + c, r < M, N - c, &acc[i][h * 4]);
    }
  }
}

// tile128x8: the seed's kernel. 16x16 threads, thread (tx, ty) owns rows ty*8.. and columns tx*8..
template <bool VEC>
__global__ void __launch_bounds__(THREADS)
sgemm_128x8_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
  __shared__ __align__(16) float sA[BM][BK];
  __shared__ __align__(16) float sB[BK][BN];
  const int tx = threadIdx.x, ty = threadIdx.y;
  TileLoader ld(A, B, M, N, K, ty * 16 + tx);
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    float4 ra, rb;
    ld.load<VEC>(k0, N, ra, rb);
    *reinterpret_cast<float4*>(&sA[ld.a_r][ld.a_k]) = ra;
    *reinterpret_cast<float4*>(&sB[ld.b_k][ld.b_n]) = rb;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += sA[ty * TM + m][k] * sB[k][tx * TN + n];
    __syncthreads();
  }
  const int rows[TM] = {0, 1, 2, 3, 4, 5, 6, 7};
  store_tile<VEC>(C, acc, blockIdx.y * BM + ty * TM, rows, blockIdx.x * BN + tx * TN, 4, M, N);
}

// The double-buffered kernels keep both stages in one array, A part then B part, and address
// them through four fixed base pointers plus the offset `so` of the stage being read (the other
// stage is at STAGE - so): few live registers, so 2 blocks of 256 threads fit without spills.
__device__ __forceinline__ void sts4(float* p, const float4& v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// dbuf: tile128x8 with two smem stages. While the FFMAs run on one stage, the next k-tile's
// global loads are in flight into registers; they go to the other stage after the FFMAs. One
// barrier per k-tile suffices: the other stage was last read before the previous barrier.
template <bool VEC>
__global__ void __launch_bounds__(THREADS, VEC ? 2 : 1)  // scalar fallback: more registers
sgemm_dbuf_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                  int M, int N, int K) {
  constexpr int SA = BM * BK, STAGE = SA + BK * BN;  // sA[BM][BK] then sB[BK][BN]
  __shared__ __align__(16) float smem[2 * STAGE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  TileLoader ld(A, B, M, N, K, ty * 16 + tx);
  float* const wa = smem + ld.a_r * BK + ld.a_k;
  float* const wb = smem + SA + ld.b_k * BN + ld.b_n;
  const float* const ra0 = smem + ty * TM * BK;  // A rows ty*8..
  const float* const rb0 = smem + SA + tx * TN;  // B columns tx*8..
  float acc[TM][TN] = {};
  float4 ra, rb;
  ld.load<VEC>(0, N, ra, rb);
  sts4(wa, ra);
  sts4(wb, rb);
  __syncthreads();
  int so = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    ld.load<VEC>(k0 + BK, N, ra, rb);  // past the last tile: zero fill, no memory access
#pragma unroll
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += ra0[so + m * BK + k] * rb0[so + k * BN + n];
    sts4(wa + (STAGE - so), ra);
    sts4(wb + (STAGE - so), rb);
    __syncthreads();
    so = STAGE - so;
  }
  const int rows[TM] = {0, 1, 2, 3, 4, 5, 6, 7};
  store_tile<VEC>(C, acc, blockIdx.y * BM + ty * TM, rows, blockIdx.x * BN + tx * TN, 4, M, N);
}

// warptile: 8 warps as 2 (M) x 4 (N), each owning 64x32 of C; lanes as 8 (M) x 4 (N), each owning
// rows {0..3, 32..35} + 4*lm and columns {0..3, 16..19} + 4*ln of its warp tile. A k-step then
// reads 8 distinct float4 of A^T (128 contiguous bytes) and 4 of B per warp: LDS.128, no bank
// conflicts. A^T rows are padded to 132 floats so that the transposed scalar stores of a warp
// (16 rows x k and k+4) land in 32 different banks.
template <bool VEC>
__global__ void __launch_bounds__(THREADS, VEC ? 2 : 1)  // scalar fallback: more registers
sgemm_warptile_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                      int M, int N, int K) {
  constexpr int LDA = BM + 4, SA = BK * LDA, STAGE = SA + BK * BN;  // sA^T[BK][LDA] then sB[BK][BN]
  __shared__ __align__(16) float smem[2 * STAGE];
  const int tid = threadIdx.x, warp = tid / LK_WARP, lane = tid % LK_WARP;
  const int row0 = (warp / 4) * 64 + (lane / 4) * 4;  // block-tile row of this lane's first 4x4
  const int col0 = (warp % 4) * 32 + (lane % 4) * 4;  // block-tile column
  TileLoader ld(A, B, M, N, K, tid);
  float* const wa = smem + ld.a_k * LDA + ld.a_r;  // A^T[a_k + i][a_r], i = 0..3
  float* const wb = smem + SA + ld.b_k * BN + ld.b_n;
  const float* const ra0 = smem + row0;
  const float* const rb0 = smem + SA + col0;
  auto stage = [](float* a, float* b, const float4& va, const float4& vb) {
    a[0] = va.x; a[LDA] = va.y; a[2 * LDA] = va.z; a[3 * LDA] = va.w;
    sts4(b, vb);
  };

  float acc[TM][TN] = {};
  float4 ra, rb;
  ld.load<VEC>(0, N, ra, rb);
  stage(wa, wb, ra, rb);
  __syncthreads();
  int so = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    ld.load<VEC>(k0 + BK, N, ra, rb);  // past the last tile: zero fill, no memory access
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = lds4(ra0 + so + k * LDA), a1 = lds4(ra0 + so + k * LDA + 32);
      const float4 b0 = lds4(rb0 + so + k * BN), b1 = lds4(rb0 + so + k * BN + 16);
      const float fa[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float fb[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += fa[m] * fb[n];
    }
    stage(wa + (STAGE - so), wb + (STAGE - so), ra, rb);
    __syncthreads();
    so = STAGE - so;
  }
  const int rows[TM] = {0, 1, 2, 3, 32, 33, 34, 35};
  store_tile<VEC>(C, acc, blockIdx.y * BM + row0, rows, blockIdx.x * BN + col0, 16, M, N);
}

// ---- async / tuned: the cp.async pipeline kernel, in its own file for length ------------------------
#include "sgemm_async.cuh"

// ---- launchers -------------------------------------------------------------------------------------
struct Gemm {
  const float* A;
  const float* B;
  float* C;
  int M, N, K;
};

static Gemm gemm_args(const lk_args* args) {
  return {lk_ptr<const float>(args->t[0]), lk_ptr<const float>(args->t[1]), lk_ptr<float>(args->t[2]),
          int(args->t[0].size[0]), int(args->t[1].size[1]), int(args->t[0].size[1])};
}

static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

using GemmKernel = void (*)(const float*, const float*, float*, int, int, int);

// The 2-D grids (x: N's tiles, y: M's) hold at most 65535 tile rows: a taller C runs as bands of
// that many, one launch each on the band's rows of A and C (3000000 x 4 x 4 failed to launch in tiled32).
static void launch_bands(GemmKernel k, const Gemm& g, int tile_m, int tile_n, dim3 block, cudaStream_t stream) {
  constexpr int64_t kMaxTileRows = 65535;
  for (int64_t m0 = 0; m0 < g.M; m0 += kMaxTileRows * tile_m) {
    const int m = int(g.M - m0 < kMaxTileRows * tile_m ? g.M - m0 : kMaxTileRows * tile_m);
    k<<<dim3(ceil_div(g.N, tile_n), ceil_div(m, tile_m)), block, 0, stream>>>(g.A + m0 * g.K, g.B, g.C + m0 * g.N, m,
                                                                             g.N, g.K);
  }
}

// fast: float4 accesses, needs K % 4 == 0, N % 4 == 0 and aligned pointers (a band's start keeps them
// aligned); guarded: scalar.
static int launch_128(const lk_args* args, cudaStream_t stream, GemmKernel fast, GemmKernel guarded, dim3 block) {
  const Gemm g = gemm_args(args);
  const bool vec = g.K % 4 == 0 && g.N % 4 == 0 && aligned16(g.A) && aligned16(g.B) && aligned16(g.C);
  launch_bands(vec ? fast : guarded, g, BM, BN, block, stream);
  return lk_launch_status(vec ? LK_PATH_VECTOR : LK_PATH_FALLBACK);
}

static int launch_tiled32(const lk_args* args, cudaStream_t stream) {
  launch_bands(sgemm_tiled_kernel<32>, gemm_args(args), 32, 32, dim3(32, 32), stream);
  return lk_launch_status();
}
static int launch_tile128x8(const lk_args* a, cudaStream_t s) {
  return launch_128(a, s, sgemm_128x8_kernel<true>, sgemm_128x8_kernel<false>, dim3(16, 16));
}
static int launch_dbuf(const lk_args* a, cudaStream_t s) {
  return launch_128(a, s, sgemm_dbuf_kernel<true>, sgemm_dbuf_kernel<false>, dim3(16, 16));
}
static int launch_warptile(const lk_args* a, cudaStream_t s) {
  return launch_128(a, s, sgemm_warptile_kernel<true>, sgemm_warptile_kernel<false>, dim3(THREADS));
}

// async / tuned: float4 copies of B and stores of C when N % 4 == 0 and B, C are 16-byte aligned
// (A is copied 4 bytes at a time: any K, any alignment); otherwise 4-byte copies and stores.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GROUP>
static int launch_async(const lk_args* args, cudaStream_t stream) {
  using S = AsyncShape<BM, BN, BK, WM, WN, TM, TN, STAGES>;
  const Gemm g = gemm_args(args);
  const bool vec = g.N % 4 == 0 && aligned16(g.B) && aligned16(g.C);
  GemmKernel k = vec ? sgemm_async_kernel<BM, BN, BK, WM, WN, TM, TN, STAGES, GROUP, true>
                     : sgemm_async_kernel<BM, BN, BK, WM, WN, TM, TN, STAGES, GROUP, false>;
  const int64_t blocks = int64_t(ceil_div(g.M, BM)) * ceil_div(g.N, BN);
  if (blocks > INT32_MAX) return -static_cast<int>(cudaErrorInvalidConfiguration);
  if (S::SMEM > (48 << 10)) {  // above 48 KiB a kernel must ask for its dynamic shared memory: once per
    static bool asked[2][64];   // kernel and device, at the first (checked) launch, before any graph capture
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= 64 || !asked[vec][dev]) {
      const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
      if (e != cudaSuccess) return -static_cast<int>(e);
      if (dev >= 0 && dev < 64) asked[vec][dev] = true;
    }
  }
  k<<<unsigned(blocks), S::THREADS, S::SMEM, stream>>>(g.A, g.B, g.C, g.M, g.N, g.K);
  return lk_launch_status(vec ? LK_PATH_VECTOR : LK_PATH_FALLBACK);
}

// tuned's defaults per GPU: its export line (labkit/ops/sgemm.py, GPU_DEFAULTS) lists one launcher
// per family of SGEMM_GPUS, in this order, then the one for any other GPU. The family is found once
// per device, from its name.
static const char* const SGEMM_GPUS[] = {"H100", "H200"};
constexpr int SGEMM_FAMILIES = sizeof(SGEMM_GPUS) / sizeof(SGEMM_GPUS[0]);

static int gpu_family() {
  static int family[64];  // per device: 0 = not looked up yet, else 1 + the family (SGEMM_FAMILIES: other)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return SGEMM_FAMILIES;
  if (!family[dev]) {
    cudaDeviceProp p;
    int f = SGEMM_FAMILIES;
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess)
      for (int i = SGEMM_FAMILIES - 1; i >= 0; --i)
        if (strstr(p.name, SGEMM_GPUS[i])) f = i;
    family[dev] = 1 + f;
  }
  return family[dev] - 1;
}

using Launch = int (*)(const lk_args*, cudaStream_t);
template <Launch... BY_FAMILY_THEN_OTHER>
static int launch_by_gpu(const lk_args* a, cudaStream_t s) {
  static_assert(sizeof...(BY_FAMILY_THEN_OTHER) == SGEMM_FAMILIES + 1, "one launcher per family, then the default");
  constexpr Launch table[] = {BY_FAMILY_THEN_OTHER...};
  return table[gpu_family()](a, s);
}

// The exported launchers (`int sgemm_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/sgemm.py (labkit.build.export_source): `labkit list` prints them.
