// Grid-stride int32 copy (CATALOG §2, seed 003): 128 threads per block, the block count capped at
// i[0] (MAX_BLOCKS) so each thread loops. Misaligned views take the scalar kernel (LK_PATH_FALLBACK).
//   variants   int (4 bytes per access); int2, int4 move 8 / 16 bytes per access and finish the
//              N % 2 / N % 4 remainder with scalar copies (labkit/ops/copy_gs.py; `labkit list copy_gs`)
//   reference  labkit/ops/copy_gs.py: the input itself, compared bit for bit; torch's copy_ the baseline
//   below      copy_gs_kernel, launch_copy_gs; the exported launchers are generated
#include "labkit.cuh"

// ---- kernel ---------------------------------------------------------------------------------------
template <int V>  // ints per access: 1 (int), 2 (int2), 4 (int4)
__global__ void copy_gs_kernel(const int* __restrict__ in, int* __restrict__ out, int64_t n) {
  using Vec = Pack<int, V>;
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  const int64_t nv = n / V;
  for (int64_t i = start; i < nv; i += stride) {
    Vec v;
    lk_load<sizeof(Vec)>(v, in + i * V);
    lk_store<sizeof(Vec)>(out + i * V, v);
  }
  for (int64_t i = nv * V + start; i < n; i += stride) out[i] = in[i];  // remainder
}

// ---- launcher: t[0] = in, t[1] = out, i[0] = MAX_BLOCKS (<= 0: 2048) -------------------------------
template <int V>
static int launch_copy_gs(const lk_args* args, cudaStream_t stream) {
  const int* in = lk_ptr<const int>(args->t[0]);
  int* out = lk_ptr<int>(args->t[1]);
  const int64_t n = args->t[1].numel;
  const int64_t max_blocks = args->i[0] > 0 ? args->i[0] : 2048;
  const int threads = 128;
  const bool aligned = (reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % (4 * V) == 0;
  const int64_t work = aligned ? ceil_div<int64_t>(n / V, threads) : ceil_div<int64_t>(n, threads);
  const int blocks = int(work < 1 ? 1 : (work < max_blocks ? work : max_blocks));
  if (!aligned) {
    copy_gs_kernel<1><<<blocks, threads, 0, stream>>>(in, out, n);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  copy_gs_kernel<V><<<blocks, threads, 0, stream>>>(in, out, n);
  return lk_launch_status();
}

// The exported launchers (`int copy_gs_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/copy_gs.py (labkit.build.export_source): `labkit list` prints them.
