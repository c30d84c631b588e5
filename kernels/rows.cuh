// Row kernels that hold a row in registers (softmax_rows, layer_norm, rms_norm): one read and one
// write per element. F is the row op: F::apply<WARP_ROW>(v, row, scratch) turns the row's values
// (f32, PACKS x VEC per thread) into its outputs in place. Shapes come from lk_plan_row.
//
// Persistent and double-buffered: the grid is one wave of resident blocks, and each block (or warp,
// in warp mode) loads its next row into a second register buffer before it works on the current
// one, so loads are in flight while the row's reductions and math run. Measured on an H200 at
// 256 MiB moved: a block that loaded, reduced and stored one row each ran 16-bit rows at 73-91 %
// of the copy peak, though a block-per-row copy of the same shape (load, barrier, store) reached
// 100 %: the math between a row's loads and stores left the memory system idle.
#pragma once
#include "labkit.cuh"

struct RowView {  // which of a thread's packs lie inside the row (K % VEC == 0 here)
  int tid, nthr, K, vec;
  __device__ __forceinline__ bool has(int p) const { return (p * nthr + tid) * vec < K; }
  __device__ __forceinline__ int col(int p) const { return (p * nthr + tid) * vec; }
};

template <typename T, int VEC, int PACKS>
__device__ __forceinline__ void row_load(Pack<T, VEC> (&r)[PACKS], const T* xr, const RowView& rv) {
#pragma unroll
  for (int p = 0; p < PACKS; ++p)  // all loads issued before any use: PACKS x 16 B in flight
    if (rv.has(p)) lk_load<16>(r[p], xr + rv.col(p));
}

template <bool WARP_ROW, typename F, typename T, int VEC, int PACKS>
__device__ __forceinline__ void row_apply(const F& f, const Pack<T, VEC> (&r)[PACKS], T* yr, const RowView& rv,
                                          float* scratch) {
  float v[PACKS][VEC];
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
    if (rv.has(p)) to_floats(v[p], r[p]);
  f.template apply<WARP_ROW>(v, rv, scratch);
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
    if (rv.has(p)) {
      Pack<T, VEC> o;
      from_floats(o, v[p]);
      lk_store<16>(yr + rv.col(p), o);
    }
}

// Sum of a thread's values (through g) over the row: the warp (WARP_ROW) or the block.
template <bool WARP_ROW, bool MAX, int PACKS, int VEC, typename G>
__device__ __forceinline__ float row_fold(const float (&v)[PACKS][VEC], const RowView& rv, float* scratch, G g) {
  float acc = MAX ? -INFINITY : 0.f;
#pragma unroll
  for (int p = 0; p < PACKS; ++p)
    if (rv.has(p))
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc = MAX ? fmaxf(acc, g(v[p][k])) : acc + g(v[p][k]);
  return row_reduce<WARP_ROW, MAX>(acc, scratch);
}

template <typename F, typename T, int VEC, int PACKS, bool WARP_ROW>
__global__ void __launch_bounds__(LK_ROW_THREADS) rows_reg_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                 int64_t rows, int K, F f) {
  __shared__ float scratch[LK_WARP];
  const RowView rv{WARP_ROW ? int(threadIdx.x % LK_WARP) : int(threadIdx.x), WARP_ROW ? LK_WARP : int(blockDim.x), K,
                   VEC};
  // warp mode: warp w of the grid takes rows w, w + step, ...; every thread of a block the same
  // rows in block mode, so the block barriers inside F stay uniform
  const int64_t first = WARP_ROW ? int64_t(blockIdx.x) * (blockDim.x / LK_WARP) + threadIdx.x / LK_WARP : blockIdx.x;
  const int64_t step = WARP_ROW ? int64_t(gridDim.x) * (blockDim.x / LK_WARP) : gridDim.x;
  Pack<T, VEC> a[PACKS], b[PACKS];
  if (first < rows) row_load(a, x + first * K, rv);
  for (int64_t row = first; row < rows; row += 2 * step) {  // two buffers, no register copies
    if (row + step < rows) row_load(b, x + (row + step) * K, rv);
    row_apply<WARP_ROW>(f, a, y + row * K, rv, scratch);
    if (row + 2 * step < rows) row_load(a, x + (row + 2 * step) * K, rv);
    if (row + step < rows) row_apply<WARP_ROW>(f, b, y + (row + step) * K, rv, scratch);
  }
}

template <typename F, typename T, int VEC, int PACKS, bool WARP_ROW>
static void launch_rows_kernel(const T* x, T* y, int64_t rows, int K, const F& f, int threads, cudaStream_t stream) {
  static int per_sm[LK_ROW_THREADS / LK_WARP + 1];  // resident blocks per SM, per block size (cached)
  const auto kernel = rows_reg_kernel<F, T, VEC, PACKS, WARP_ROW>;
  int& occ = per_sm[threads / LK_WARP];
  if (!occ && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, 0) != cudaSuccess) occ = 1;
  const int64_t want = WARP_ROW ? ceil_div<int64_t>(rows, threads / LK_WARP) : rows;
  const int64_t wave = int64_t(lk_sm_count()) * (occ > 0 ? occ : 1);
  kernel<<<want < wave ? want : wave, threads, 0, stream>>>(x, y, rows, K, f);
}

// Launch for VEC-wide, 16-byte aligned rows of K elements; false if the row is too long to hold
// (the caller streams it). The grid: one wave of resident blocks.
template <typename F, typename T, int VEC>
static bool launch_rows_reg(const T* x, T* y, int64_t rows, int K, const F& f, cudaStream_t stream) {
  const lk_row_plan plan = lk_plan_row(K / VEC, VEC);
  if (plan.packs == 0) return false;
  lk_with_packs<VEC>(plan.packs, [&](auto packs) {
    constexpr int PACKS = decltype(packs)::value;
    if (plan.warp) launch_rows_kernel<F, T, VEC, PACKS, true>(x, y, rows, K, f, plan.threads, stream);
    else launch_rows_kernel<F, T, VEC, PACKS, false>(x, y, rows, K, f, plan.threads, stream);
  });
  return true;
}
