// Harness pieces compiled once per arch, beside the catalog (no torch):
//  * lk_error_string: the CUDA error string for a launcher's negative return code;
//  * the blocking kernel (nvbench's approach): it spins on a flag in pinned host memory, so every
//    launch of a timed region is enqueued while the GPU waits, and no host cost can land between
//    the start and stop events; a timeout ends the spin if the host never releases it (a crashed
//    or stalled host must not hang the GPU), and says so;
//  * lk_empty: a launch that does nothing, timed like a variant to measure the event floor;
//  * lk_mark_begin / lk_mark_end: empty markers around each sample while CUPTI records the timed loop
//    (labkit.cupti), outside its events: the kernels between a pair are that sample's;
//  * lk_fma: the FP32 ceiling (labkit.ceilings, with lk_empty);
//  * lk_read: the read floor, the least any reduction of n floats does (labkit.benchmarks.floors).
// Its callers: labkit/launch.py (lk_error_string), labkit/timing.py (the blocking kernel),
// labkit/cupti.py (the markers), labkit/ceilings.py (lk_empty, lk_fma), labkit/benchmarks/floors.py.
#include "labkit.cuh"

LK_EXPORT const char* lk_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

__device__ __forceinline__ uint64_t lk_globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// flag[0]: released by the host; flag[1]: set here when the spin timed out (read by the host).
__global__ void lk_block_kernel(volatile int32_t* flag, uint64_t timeout_ns) {
  const uint64_t t0 = lk_globaltimer();
  while (flag[0] == 0) {
    if (lk_globaltimer() - t0 > timeout_ns) {
      flag[1] = 1;
      return;
    }
  }
}

static int32_t* lk_flag = nullptr;  // pinned, mapped: the same address on host and device (UVA)

// Enqueue the blocking kernel on `stream`. Returns 0, or a negative CUDA error code.
LK_EXPORT int lk_block(cudaStream_t stream, double timeout_s) {
  if (lk_flag == nullptr) {
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, 2 * sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) return -static_cast<int>(err);
    lk_flag = static_cast<int32_t*>(p);
    lk_flag[1] = 0;
  }
  __atomic_store_n(&lk_flag[0], 0, __ATOMIC_SEQ_CST);
  int32_t* dflag = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), lk_flag, 0);
  if (err != cudaSuccess) return -static_cast<int>(err);
  lk_block_kernel<<<1, 1, 0, stream>>>(dflag, static_cast<uint64_t>(timeout_s * 1e9));
  return lk_launch_status();
}

// Release the blocking kernel: the enqueued work starts now, back to back.
LK_EXPORT void lk_unblock() {
  if (lk_flag) __atomic_store_n(&lk_flag[0], 1, __ATOMIC_SEQ_CST);
}

// After a synchronize: did a blocking kernel time out since the last call? (then clears it)
LK_EXPORT int lk_block_timed_out() {
  if (!lk_flag) return 0;
  return __atomic_exchange_n(&lk_flag[1], 0, __ATOMIC_SEQ_CST);
}

__global__ void lk_empty_kernel() {}

// The event floor: one block of one thread that does nothing, launched like a variant.
LK_EXPORT int lk_empty(const lk_args*, cudaStream_t stream) {
  lk_empty_kernel<<<1, 1, 0, stream>>>();
  return lk_launch_status();
}

__global__ void lk_mark_begin_kernel() {}
__global__ void lk_mark_end_kernel() {}

LK_EXPORT int lk_mark_begin(const lk_args*, cudaStream_t stream) {
  lk_mark_begin_kernel<<<1, 1, 0, stream>>>();
  return lk_launch_status();
}

LK_EXPORT int lk_mark_end(const lk_args*, cudaStream_t stream) {
  lk_mark_end_kernel<<<1, 1, 0, stream>>>();
  return lk_launch_status();
}

// The FP32 ceiling: 8 independent FFMA chains per thread (enough to hide the FMA latency at any
// occupancy), unrolled so loop overhead is ~1 % of the issue slots. t[0] = out (f32, one per
// thread: the sums are stored so nothing is dead code), i[0] = iterations, i[1] = blocks.
constexpr int LK_FMA_CHAINS = 8;
__global__ void lk_fma_kernel(float* out, int iters) {
  float a[LK_FMA_CHAINS];
#pragma unroll
  for (int k = 0; k < LK_FMA_CHAINS; ++k) a[k] = threadIdx.x * 1e-7f + k;
  const float b = 0.9999999f, c = 1e-7f;
#pragma unroll 16
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < LK_FMA_CHAINS; ++k) a[k] = fmaf(a[k], b, c);
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < LK_FMA_CHAINS; ++k) s += a[k];
  out[int64_t(blockIdx.x) * blockDim.x + threadIdx.x] = s;
}

LK_EXPORT int lk_fma(const lk_args* args, cudaStream_t stream) {
  const int iters = int(args->i[0]);
  const int64_t blocks = args->i[1];
  if (args->t[0].numel < blocks * 256) return -static_cast<int>(cudaErrorInvalidValue);
  lk_fma_kernel<<<unsigned(blocks), 256, 0, stream>>>(lk_ptr<float>(args->t[0]), iters);
  return lk_launch_status();
}

// The read floor: n floats read once, 16 bytes per load, 4 loads in flight per thread, each block's
// sum stored to out[block] and nothing after (no ticket, no finish): what is left of a reduction's
// time once everything but the reading is taken away, the launch and the DRAM ramp and drain
// included. 1024-thread blocks, the grid the GPU holds at once (reduce.cu's one-pass shape).
// t[0] = x (f32, n a multiple of 4, 16-byte aligned), t[1] = out (f32, >= the blocks), i[0] = blocks.
constexpr int LK_READ_THREADS = 1024, LK_READ_U = 4;
__global__ void __launch_bounds__(LK_READ_THREADS, 2) lk_read_kernel(const float4* __restrict__ x, float* out,
                                                                     int64_t packs) {
  __shared__ float scratch[32];
  const int64_t stride = int64_t(gridDim.x) * LK_READ_THREADS;
  float a = 0.f, b = 0.f;
  int64_t p = int64_t(blockIdx.x) * LK_READ_THREADS + threadIdx.x;
  for (; p + (LK_READ_U - 1) * stride < packs; p += LK_READ_U * stride) {
    float4 r[LK_READ_U];
#pragma unroll
    for (int u = 0; u < LK_READ_U; ++u) r[u] = x[p + u * stride];
#pragma unroll
    for (int u = 0; u < LK_READ_U; ++u) a += r[u].x + r[u].y, b += r[u].z + r[u].w;
  }
  for (; p < packs; p += stride) {
    const float4 r = x[p];
    a += r.x + r.y, b += r.z + r.w;
  }
  const float v = block_reduce_sum<LK_READ_THREADS>(a + b, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

LK_EXPORT int lk_read(const lk_args* args, cudaStream_t stream) {
  const int64_t n = args->t[0].numel, blocks = args->i[0];
  const float* x = lk_ptr<const float>(args->t[0]);
  if (n % 4 || reinterpret_cast<uintptr_t>(x) % 16 || blocks < 1 || args->t[1].numel < blocks)
    return -static_cast<int>(cudaErrorInvalidValue);
  lk_read_kernel<<<unsigned(blocks), LK_READ_THREADS, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                                    lk_ptr<float>(args->t[1]), n / 4);
  return lk_launch_status();
}
