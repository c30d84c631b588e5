// Copy with a per-thread access unit of W = 1, 2, 4, 8, 16 bytes (CATALOG §2, seed 001):
// one generic Pack<uint8_t, W> moved with one W-byte load and one W-byte store per thread.
// Any byte count and alignment: scalar head + packs + scalar tail (or the byte kernel when src
// and dst are misaligned differently, reported as LK_PATH_FALLBACK).
//   variants   w1 w2 w4 w8 w16: W bytes per access (labkit/ops/copy.py; `labkit list copy`); w16 is also
//              one of the two copies the copy peak is measured with (labkit/ceilings.py, with torch's copy_)
//   reference  labkit/ops/copy.py: the input itself, compared bit for bit; torch's copy_ the baseline
//   below      copy_kernel, launch_copy; the exported launchers are generated
#include "labkit.cuh"

// ---- kernel ---------------------------------------------------------------------------------------
template <int W>
__global__ void copy_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, lk_split s) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < s.packs) {
    const int64_t i = s.head + t * W;
    Pack<uint8_t, W> p;
    lk_load<W>(p, src + i);
    lk_store<W>(dst + i, p);
  }
  if (t < s.head + s.tail) {
    const int64_t i = lk_edge_index(s, W, t);
    dst[i] = src[i];
  }
}

// ---- launcher: t[0] = src, t[1] = dst (any dtype: its bytes are copied) ------------------------------
template <int W>
static int launch_copy(const lk_args* args, cudaStream_t stream) {
  const uint8_t* src = lk_ptr<const uint8_t>(args->t[0]);
  uint8_t* dst = lk_ptr<uint8_t>(args->t[1]);
  const int64_t n = args->t[1].numel * args->t[1].itemsize;
  const int threads = 256;
  const void* ptrs[2] = {src, dst};
  lk_split s = lk_make_split(n, W, 1, ptrs, 2);
  if (!s.vector) {
    s = lk_make_split(n, 1, 1, ptrs, 2);
    copy_kernel<1><<<ceil_div<int64_t>(n, threads), threads, 0, stream>>>(src, dst, s);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  copy_kernel<W><<<ceil_div<int64_t>(work > 0 ? work : 1, threads), threads, 0, stream>>>(src, dst, s);
  return lk_launch_status();
}

// The exported launchers (`int copy_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/copy.py (labkit.build.export_source): `labkit list` prints them.
