// The async / tuned sgemm kernel (kernels/sgemm.cu's variants warptile_async and tuned), included by
// sgemm.cu after its guarded accesses (load4 / store4), where this section would otherwise stand.
#pragma once

// ---- async / tuned: a cp.async pipeline of STAGES shared-memory stages, any tile shape --------------
// One kernel, its tile shape as template arguments (the `tuned` variant's tuning axes):
//   BM x BN x BK   block tile (C rows x C columns x k per stage), STAGES stages in flight
//   WM x WN        warp tile: (BM / WM) x (BN / WN) warps of 32 lanes
//   TM x TN        thread tile: a warp's lanes as (WM / TM) x (WN / TN), each TM x TN of C in 4x4 pieces
//                  WM / (TM / 4) rows and WN / (TN / 4) columns apart (LDS.128 fragments, as warptile)
//   GROUP          block order: GROUP tile rows at a time, down each column of the group (L2 reuse)
// cp.async copies global -> shared with no staging registers, so the accumulators get the registers
// and STAGES - 1 tiles are in flight while one is computed. A is copied 4 bytes at a time into A^T
// (k-major, so a lane's rows are one LDS.128), B 16 bytes at a time (4 bytes when VEC is false).
// Copies past M, N, K read nothing and write zeros (cp.async's src-size 0).
template <int BYTES>  // `smem`: a shared-space address (__cvta_generic_to_shared)
__device__ __forceinline__ void cp_async_zfill(uint32_t smem, const float* gmem, bool ok) {
#if __CUDA_ARCH__ >= 800
  if constexpr (BYTES == 16)  // .cg: B is read once per block, keep it out of L1
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(ok ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem), "l"(gmem), "n"(BYTES), "r"(ok ? BYTES : 0));
#else  // before sm_80: a plain load and store (correct, not asynchronous)
  float* s = static_cast<float*>(__cvta_shared_to_generic(smem));
#pragma unroll
  for (int i = 0; i < BYTES / 4; ++i) s[i] = ok ? gmem[i] : 0.f;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int PENDING> __device__ __forceinline__ void cp_async_wait() {  // all but the newest PENDING groups landed
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

// The shape's facts, checked at compile time (labkit/ops/sgemm.py::axis_rule says the same in words).
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES>
struct AsyncShape {
  static constexpr int THREADS = (BM / WM) * (BN / WN) * LK_WARP;
  static constexpr int LM = WM / TM, LN = WN / TN;  // lanes along M and N
  static constexpr int LDA = BM + 4;                // A^T row, padded: a warp's 4-byte copies (8 k x 4 rows) hit 32 banks
  static constexpr int STAGE = BK * LDA + BK * BN;  // floats: A^T[BK][LDA], then B[BK][BN]
  static constexpr int SMEM = STAGES * STAGE * 4;   // bytes
  // blocks per SM that the registers should allow (launch bounds): accumulators + 2 fragments + ~32
  static constexpr int MIN_BLOCKS = 65536 / (THREADS * (TM * TN + 2 * (TM + TN) + 32)) > 0
                                        ? 65536 / (THREADS * (TM * TN + 2 * (TM + TN) + 32)) : 1;
  static_assert(BM % WM == 0 && BN % WN == 0, "the warp tile divides the block tile");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4x4 pieces");
  static_assert(TM * TN <= 128, "at most 128 accumulators (8x16): the fragments and addresses need the rest of 255");
  static_assert(WM % TM == 0 && WN % TN == 0 && LM * LN == LK_WARP, "a warp tile is 32 thread tiles");
  static_assert(LM >= 2 && LN >= 2, "lanes pair up along M and along N (the interleaved lane order)");
  static_assert(BK % 8 == 0 && BM % (THREADS / 8) == 0 && (BM * BK) % THREADS == 0, "A copies: 8 k x THREADS / 8 rows");
  static_assert(STAGES >= 2 && THREADS <= 1024 && SMEM <= 227 * 1024, "2+ stages, 1024 threads, 227 KiB");
};

// Block `id` -> its tile (tm, tn): GROUP tile rows at a time, down the rows of the group, then the
// next column; GROUP = 1 is plain row-major order.
template <int GROUP>
__device__ __forceinline__ void block_tile(int id, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = GROUP * tiles_n, first = id / per_group * GROUP, r = id % per_group;
  const int rows = min(tiles_m - first, GROUP);
  tm = first + r % rows;
  tn = r / rows;
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int GROUP, bool VEC>
__global__ void __launch_bounds__(AsyncShape<BM, BN, BK, WM, WN, TM, TN, STAGES>::THREADS,
                                  AsyncShape<BM, BN, BK, WM, WN, TM, TN, STAGES>::MIN_BLOCKS)
sgemm_async_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K) {
  using S = AsyncShape<BM, BN, BK, WM, WN, TM, TN, STAGES>;
  constexpr int THREADS = S::THREADS, LM = S::LM, LN = S::LN, LDA = S::LDA, STAGE = S::STAGE, SA = BK * LDA;
  float* const smem = reinterpret_cast<float*>(lk_dyn_smem);
  int tm, tn;
  block_tile<GROUP>(blockIdx.x, ceil_div(M, BM), ceil_div(N, BN), tm, tn);
  const int tid = threadIdx.x, warp = tid / LK_WARP, lane = tid % LK_WARP;
  // Lanes interleaved by two (CUTLASS's RowMajorInterleaved<2>): lanes n and n^1 read the same B
  // fragment, n and n^2 the same A fragment, so each LDS.128 returns 2 wavefronts of data, not 4.
  const int lm = (lane >> 1) / LN * 2 + (lane & 1), ln = (lane >> 1) % LN;
  const int row0 = (warp / (BN / WN)) * WM + lm * 4;  // block-tile row of the lane's first 4x4 piece
  const int col0 = (warp % (BN / WN)) * WN + ln * 4;

  // Copies. A: 8 k x THREADS / 8 rows per pass; B: rows of the tile, BW floats per copy. The k
  // tiles start `kpad` before k = 0, so that the first tile is the one K cuts short: it alone tests
  // k (in the prologue) and the main loop copies whole tiles. Rows and columns past M and N, and
  // k < 0, are copied with src-size 0: zeros, the pointer formed but never read.
  constexpr int A_PASSES = BM * BK / THREADS, AR = THREADS / 8;
  constexpr int BW = VEC ? 4 : 1, B_ROW = BN / BW, B_PASSES = BK * B_ROW / THREADS;
  static_assert(B_PASSES * THREADS == BK * B_ROW && (THREADS % B_ROW == 0 || B_ROW % THREADS == 0),
                "B copies: whole passes over the tile");
  const int kpad = (BK - K % BK) % BK;
  const uint32_t smem0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int a_k = tid % 8, a_m = tid / 8, gm = tm * BM + a_m;
  const float* a_src = A + int64_t(gm) * K + a_k - kpad;
  const uint32_t a_dst = smem0 + 4 * (a_k * LDA + a_m);
  // B: a thread keeps one column (THREADS % B_ROW == 0) or one k row per pass (B_ROW % THREADS == 0)
  constexpr bool B_COL = THREADS % B_ROW == 0;
  const int b_k = B_COL ? tid / B_ROW : 0, b_n = (B_COL ? tid % B_ROW : tid) * BW, gn = tn * BN + b_n;
  const float* b_src = B + int64_t(b_k - kpad) * N + gn;
  const uint32_t b_dst = smem0 + 4 * (SA + b_k * BN + b_n);
  auto load_tile = [&](auto first, uint32_t stage) {  // the next k tile into `stage` (byte offset)
    constexpr bool FIRST = decltype(first)::value;
#pragma unroll
    for (int p = 0; p < A_PASSES; ++p) {
      const int dm = (p * AR) % BM, dk = (p * AR) / BM * 8;
      cp_async_zfill<4>(a_dst + stage + 4 * (dk * LDA + dm), a_src + int64_t(dm) * K + dk,
                        gm + dm < M && (!FIRST || a_k + dk >= kpad));
    }
#pragma unroll
    for (int p = 0; p < B_PASSES; ++p) {
      const int dk = B_COL ? p * (THREADS / B_ROW) : p * THREADS / B_ROW;
      const int dn = B_COL ? 0 : p * THREADS % B_ROW * BW;
      cp_async_zfill<4 * BW>(b_dst + stage + 4 * (dk * BN + dn), b_src + int64_t(dk) * N + dn,
                             gn + dn < N && (!FIRST || b_k + dk >= kpad));
    }
    a_src += BK;
    b_src += int64_t(BK) * N;
  };

  float acc[TM][TN] = {};
  const int KT = ceil_div(K, BK);
  constexpr uint32_t STAGE_B = 4 * STAGE, LAST = (STAGES - 1) * STAGE_B;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {  // the prologue: tiles 0 .. STAGES - 2 in flight
    if (s == 0) load_tile(std::true_type{}, 0);
    else if (s < KT) load_tile(std::false_type{}, s * STAGE_B);
    cp_async_commit();  // one group per tile, empty past the end: the wait counts stay aligned
  }
  // The fragments are double-buffered in registers, one k-step ahead, across tiles too (CUTLASS's
  // multistage main loop): the barrier comes before a tile's last k-step, whose FFMAs then cover the
  // latency of the next tile's first fragment loads.
  uint32_t rs = 0, ws = LAST;  // byte offsets of the stage read now and the stage written now
  float a[2][TM], b[2][TN];
  auto load_frag = [&](int buf, uint32_t stage, int k) {
    const float* sa = smem + stage / 4 + k * LDA + row0;
    const float* sb = smem + stage / 4 + SA + k * BN + col0;
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) *reinterpret_cast<float4*>(&a[buf][4 * i]) = lds4(sa + i * 4 * LM);
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) *reinterpret_cast<float4*>(&b[buf][4 * j]) = lds4(sb + j * 4 * LN);
  };
  cp_async_wait<STAGES - 2>();  // tile 0 landed, for everyone
  __syncthreads();
  load_frag(0, 0, 0);
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k == BK - 1) {  // tile kt + 1 landed (this thread's copies, then everyone's), and every
        cp_async_wait<STAGES - 2>();  // warp has loaded its last fragment of tile kt - 1's stage
        __syncthreads();
        rs = rs == LAST ? 0 : rs + STAGE_B;
      }
      load_frag((k + 1) % 2, rs, (k + 1) % BK);  // the next k-step's fragments (the next tile's at k = BK - 1)
      if (k == 0) {  // into the stage of tile kt - 1, which every warp finished reading before the last barrier
        if (kt + STAGES - 1 < KT) load_tile(std::false_type{}, ws);
        cp_async_commit();
        ws = ws == LAST ? 0 : ws + STAGE_B;
      }
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] = fmaf(a[k % 2][m], b[k % 2][n], acc[m][n]);
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits

  // epilogue: piece (i, j), row ii of it
#pragma unroll
  for (int i = 0; i < TM / 4; ++i)
#pragma unroll
    for (int ii = 0; ii < 4; ++ii) {
      const int r = tm * BM + row0 + i * 4 * LM + ii;
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) {
        const int c = tn * BN + col0 + j * 4 * LN;
        store4<VEC>(C + int64_t(r) * N + c, r < M, N - c, &acc[4 * i + ii][4 * j]);
      }
    }
}
