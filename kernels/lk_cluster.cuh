// The smem row plan split over a thread-block cluster (lk_plan_row's cluster, sm_90): each of a row's
// C CTAs holds one slice of it in shared memory, and the row's sums and maxima meet through
// distributed shared memory. Shorter slices let more CTAs load at once on an SM, so their
// copy-in and passes overlap instead of alternating (a block holding a whole 32-64 KiB row).
// Without a cluster (C = 1, or before sm_90) every helper is the one-CTA row.
#pragma once
#include "labkit.cuh"
#if __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#endif

// This CTA's row and slice: packs [p0, p0 + P) of the row's packs.
struct lk_slice {
  int64_t row;
  int p0, P;
};
__device__ __forceinline__ unsigned lk_cluster_ctas() {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}
__device__ __forceinline__ lk_slice lk_row_slice(int P) {
  const int c = int(lk_cluster_ctas()), r = int(blockIdx.x) % c, per = ceil_div(P, c);
  const int p0 = r * per < P ? r * per : P;
  return {int64_t(blockIdx.x) / c, p0, (p0 + per < P ? p0 + per : P) - p0};
}

// The row's total (or maximum) of one value per CTA (after its block reduction), in rank order
// in every CTA, so all slices agree bit for bit. `slot` is the caller's __shared__ float, one per
// exchange (a CTA may still be reading the previous one).
template <bool MAX>
__device__ __forceinline__ float lk_cluster_combine(float v, float* slot) {
#if __CUDA_ARCH__ >= 900
  auto cl = cooperative_groups::this_cluster();
  if (cl.num_blocks() == 1) return v;
  if (threadIdx.x == 0) *slot = v;
  cl.sync();
  float r = MAX ? -INFINITY : 0.f;
  for (unsigned k = 0; k < cl.num_blocks(); ++k) {
    const float o = *cl.map_shared_rank(slot, k);
    r = MAX ? fmaxf(r, o) : r + o;
  }
  return r;
#else
  return v;
#endif
}

// Before a CTA exits: the others may still read its slots.
__device__ __forceinline__ void lk_cluster_done() {
#if __CUDA_ARCH__ >= 900
  auto cl = cooperative_groups::this_cluster();
  if (cl.num_blocks() > 1) cl.sync();
#endif
}
