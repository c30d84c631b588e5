// Row-wise layer_norm and rms_norm over N x K (CATALOG §4, seed 002), any K. Math is f32.
//   layer_norm  y = (x - mean) / sqrt(var + eps) * g + b   (biased var; scalars eps, g, b = f[0..2])
//   rms_norm    y = x / sqrt(mean(x^2) + eps) * g           (scalars eps, g = f[0..1])
// The seed's kernels assume K = blockDim (and its layer_norm_vec4 does not compile).
//   f32 / f16       norm_rows_stream<RMS, T, 1>: block per row, a statistics pass (layer_norm:
//                   shifted sums around the row's first element, so no cancellation) then a
//                   normalize pass that re-reads the row, mostly from cache
//   f32x4 / f16x8   norm_rows_reg: the row held in registers as f32 (lk_plan_row: a warp per row
//                   while it holds <= 32 floats per lane (layer_norm f16: 16), else a block of
//                   <= 512 threads per row), one read + one write; layer_norm's variance from
//                   the centred values. Longer rows (f32 K > 16384; f16 K >= 4096, 8 KiB):
//                   norm_rows_smem, the row in shared memory (one read + one write); rows
//                   beyond the shared memory (sm_90: f32 K > ~58000, f16 K > ~116000):
//                   norm_rows_stream with 16-byte packs. Rows not 16-byte aligned
//                   (K * itemsize % 16 != 0, or an offset view) run the scalar kernel and
//                   report LK_PATH_FALLBACK.
//   reference       labkit/ops/norm.py: each op's formula in float64 (the variants' V(...) lines there;
//                   `labkit list layer_norm`)
//   below           norm_rows_reg, norm_rows_smem, norm_rows_stream, then the launchers (launch_stream,
//                   launch_rows_vec, launch_norm); the exported launchers are generated
// From labkit.cuh (the row plan softmax.cu shares): lk_plan_row / lk_launch_smem_row / lk_with_packs,
// row_reduce (warp or block sum for a runtime block size), to_floats / from_floats (pack <-> f32 in
// 32-bit pairs), lk_smem_row_load / lk_smem_row_pass (the shared-memory row's copy-in and passes).
#include "labkit.cuh"

// ---- row in registers, as f32 ----------------------------------------------------------------
template <bool RMS, typename T, int VEC, int PACKS, bool WARP_ROW>
__global__ void __launch_bounds__(LK_ROW_THREADS) norm_rows_reg(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                     int K, float eps, float g, float b) {
  __shared__ float scratch[LK_WARP];
  const auto [row, tid, nthr, xr, yr] = lk_row_at<WARP_ROW>(x, y, K);
  if (WARP_ROW && row >= rows) return;  // whole warps only: no block barrier in warp mode
  Pack<T, VEC> r[PACKS];
  lk_row_load(r, xr, tid, nthr, K);
  float v[PACKS][VEC];
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
    if ((p * nthr + tid) * VEC < K) {
      to_floats(v[p], r[p]);
#pragma unroll
      for (int k = 0; k < VEC; ++k) sum += RMS ? v[p][k] * v[p][k] : v[p][k];
    }
  sum = row_reduce<WARP_ROW, false>(sum, scratch);
  float mean = 0.f, var = sum / K;
  if constexpr (!RMS) {  // second reduction over the centred values held in registers
    mean = sum / K;
    float sq = 0.f;
#pragma unroll
    for (int p = 0; p < PACKS; ++p)
      if ((p * nthr + tid) * VEC < K)
#pragma unroll
        for (int k = 0; k < VEC; ++k) sq += (v[p][k] - mean) * (v[p][k] - mean);
    var = row_reduce<WARP_ROW, false>(sq, scratch) / K;
  }
  const float a = rsqrtf(var + eps) * g;
#pragma unroll
  for (int p = 0; p < PACKS; ++p) {
    const int c = (p * nthr + tid) * VEC;
    if (c < K) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[p][k] = RMS ? v[p][k] * a : (v[p][k] - mean) * a + b;
      Pack<T, VEC> o;
      from_floats(o, v[p]);
      lk_store<16>(yr + c, o);
    }
  }
}

// ---- rows too long for registers: the row in shared memory as stored (lk_plan_row's smem plan) ----
// Passes over the shared copy: sum (rms: of squares), layer_norm's centred squares, normalize.
template <bool RMS, typename T, int VEC>
__global__ void __launch_bounds__(LK_SMEM_ROW_THREADS) norm_rows_smem(const T* __restrict__ x, T* __restrict__ y,
                                                                  int K, float eps, float g, float b) {
  __shared__ float scratch[LK_WARP];
  T* s = reinterpret_cast<T*>(lk_dyn_smem);
  const int P = K / VEC;  // K % VEC == 0
  lk_smem_row_load<T, VEC>(s, x + int64_t(blockIdx.x) * K, P);
  // two accumulators per sum (short dependency chains); `shift` centres layer_norm's second pass
  auto sum_pass = [&](bool square, float shift) {
    float a0 = 0.f, a1 = 0.f;
    lk_smem_row_pass<T, VEC>(s, P, [&](int, const float (&v)[VEC]) {
#pragma unroll
      for (int k = 0; k < VEC; k += 2) {
        const float d0 = v[k] - shift, d1 = v[k + 1] - shift;
        a0 += square ? d0 * d0 : d0, a1 += square ? d1 * d1 : d1;
      }
    });
    return row_reduce<false, false>(a0 + a1, scratch);
  };
  const float sum = sum_pass(RMS, 0.f);
  const float mean = RMS ? 0.f : sum / K;
  const float var = RMS ? sum / K : sum_pass(true, mean) / K;
  const float a = rsqrtf(var + eps) * g;
  T* yr = y + int64_t(blockIdx.x) * K;
  lk_smem_row_pass<T, VEC>(s, P, [&](int p, float (&v)[VEC]) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = RMS ? v[k] * a : (v[k] - mean) * a + b;
    Pack<T, VEC> o;
    from_floats(o, v);
    lk_store<16>(yr + p * VEC, o);
  });
}

// ---- any K: statistics pass, then normalize pass (block per row) --------------------------
// VEC = 1 is the scalar kernel (any alignment); VEC > 1 needs 16-byte aligned rows.
template <bool RMS, typename T, int VEC>
__global__ void __launch_bounds__(512) norm_rows_stream(const T* __restrict__ x, T* __restrict__ y, int K,
                                                        float eps, float g, float b) {
  __shared__ float scratch[LK_WARP];
  const T* xr = x + int64_t(blockIdx.x) * K;
  T* yr = y + int64_t(blockIdx.x) * K;
  // layer_norm: sums of (x - c) with c = the row's first element keep var = E[d^2] - E[d]^2
  // free of cancellation when |mean| >> std (c is within a few std of the mean)
  const float c0 = RMS ? 0.f : lk_to_float(xr[0]);
  float s1 = 0.f, s2 = 0.f;
#pragma unroll 4
  for (int c = threadIdx.x * VEC; c < K; c += blockDim.x * VEC) {
    Pack<T, VEC> r;
    lk_load<VEC * sizeof(T)>(r, xr + c);
    float f[VEC];
    to_floats(f, r);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float d = f[k] - c0;
      s1 += d;
      s2 += d * d;
    }
  }
  s2 = row_reduce<false, false>(s2, scratch) / K;
  float mean = 0.f, var = s2;
  if constexpr (!RMS) {
    const float m1 = row_reduce<false, false>(s1, scratch) / K;
    mean = c0 + m1;
    var = fmaxf(s2 - m1 * m1, 0.f);
  }
  const float a = rsqrtf(var + eps) * g;
  lk_row_map<T, VEC>(xr, yr, K, [=](float v) { return RMS ? v * a : (v - mean) * a + b; });
}

// ---- launchers -----------------------------------------------------------------------------------
struct NormArgs {
  int64_t rows;
  int K;
  float eps, g, b;
};

template <bool RMS, typename T, int VEC>
static void launch_stream(const T* x, T* y, const NormArgs& n, cudaStream_t stream) {
  int threads = ceil_div(n.K / VEC, LK_WARP) * LK_WARP;
  threads = threads < 512 ? threads : 512;
  norm_rows_stream<RMS, T, VEC><<<n.rows, threads, 0, stream>>>(x, y, n.K, n.eps, n.g, n.b);
}

// VEC-wide rows, 16-byte aligned: in registers or shared memory (lk_plan_row), or streamed.
// FLOATS (row values per thread) and THREADS (most threads per row) are tuning axes, as softmax.cu's;
// 0 = the measured default: layer_norm f16 16 floats, <= 512 threads (K = 16384 in registers: 71.8 us
// on an H200, shared memory 69.0); the others 32 floats, <= 512 threads (layer_norm f32 at K = 16384
// took 141.7 us with 1024 x 16 floats, 129.6 with 512 x 32)
template <bool RMS, typename T, int VEC, int FLOATS, int THREADS>
static void launch_rows_vec(const T* x, T* y, const NormArgs& n, cudaStream_t stream) {
  constexpr bool WIDE = RMS || std::is_same_v<T, float>;
  constexpr int floats = FLOATS ? FLOATS : (WIDE ? 32 : 16);
  constexpr int threads = THREADS ? THREADS : 512;
  static_assert(floats >= VEC && floats <= LK_ROW_FLOATS_MAX, "FLOATS: VEC .. LK_ROW_FLOATS_MAX");
  const int64_t row_bytes = int64_t(n.K) * sizeof(T);
  // 16-bit rows of >= 8 KiB: the smem plan, not a block's registers (logs a819367bf12a/rows-smem-vs-
  // default.log, rotating: H200 layer_norm f16 16384x4096 93.8 -> 94.8 % of the copy peak, 8192x8192
  // 94.4 -> 95.0, rms_norm 94.4 -> 95.5, 94.5 -> 95.2; H100 0-1.3 % faster). f32 rows: no gain.
  constexpr int64_t smem_from = sizeof(T) == 2 ? 8 << 10 : 0;
  const lk_row_plan plan = lk_plan_row(n.K / VEC, VEC, floats, threads, row_bytes, smem_from);
  if (plan.smem)
    return lk_launch_smem_row(norm_rows_smem<RMS, T, VEC>, n.rows, plan.threads, row_bytes, stream, x, y, n.K, n.eps,
                              n.g, n.b);
  if (plan.packs == 0) return launch_stream<RMS, T, VEC>(x, y, n, stream);
  const int64_t blocks = plan.warp ? ceil_div<int64_t>(n.rows, LK_ROWS_PER_BLOCK) : n.rows;
  lk_with_packs<VEC>(plan.packs, [&](auto packs) {
    constexpr int PACKS = decltype(packs)::value;
    if (plan.warp)
      norm_rows_reg<RMS, T, VEC, PACKS, true><<<blocks, plan.threads, 0, stream>>>(x, y, n.rows, n.K, n.eps, n.g, n.b);
    else
      norm_rows_reg<RMS, T, VEC, PACKS, false><<<blocks, plan.threads, 0, stream>>>(x, y, n.rows, n.K, n.eps, n.g, n.b);
  });
}

// t[0] = x (N x K), t[1] = y; f[0] = eps, f[1] = g, f[2] = b (layer_norm). VEC = 1: scalar variant.
template <bool RMS, typename T, int VEC, int FLOATS, int THREADS>
static int launch_norm(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  T* y = lk_ptr<T>(args->t[1]);
  const lk_tensor& tx = args->t[0];
  NormArgs n;
  n.K = int(tx.ndim > 0 ? tx.size[tx.ndim - 1] : 1);
  n.rows = n.K > 0 ? tx.numel / n.K : 0;
  n.eps = float(args->f[0]);
  n.g = float(args->f[1]);
  n.b = RMS ? 0.f : float(args->f[2]);
  if (n.rows == 0) return lk_launch_status();
  if constexpr (VEC == 1) {
    launch_stream<RMS, T, 1>(x, y, n, stream);
    return lk_launch_status();
  } else {
    const bool aligned = (int64_t(n.K) * sizeof(T)) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(y) % 16 == 0;
    if (!aligned) {
      launch_stream<RMS, T, 1>(x, y, n, stream);
      return lk_launch_status(LK_PATH_FALLBACK);
    }
    launch_rows_vec<RMS, T, VEC, FLOATS, THREADS>(x, y, n, stream);
    return lk_launch_status();
  }
}

// The exported launchers (`int norm_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/norm.py (labkit.build.export_source): `labkit list` prints them.
