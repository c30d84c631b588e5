// Grid-wide helpers of the one-pass reductions (reduce.cu, dot.cu, histogram.cu) and of softmax.cu's
// merge: a grid the GPU holds at once, counted from the kernel's own occupancy, and a finish without a
// second kernel.
#pragma once
#include "labkit.cuh"

// Blocks of KERNEL resident on the whole GPU at once: SMs x blocks per SM that its registers and
// static shared memory allow. resident_blocks() counts threads only: a 40-register kernel of
// 256-thread blocks fits 6 per SM, not 8, and the other 2 x 132 blocks ran as a second, 25 %-full
// wave (reduce_sum bf16x8_pack 85.6 % of the H200's copy peak, f16x8_pack at 32 registers 88.7 %).
// Looked up once per device and kernel.
template <auto KERNEL>
static inline int lk_resident_grid(int threads) {
  static int per_sm[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= 64) return lk_sm_count();
  if (!per_sm[dev] && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm[dev], KERNEL, threads, 0) != cudaSuccess)
    per_sm[dev] = 1;
  return lk_sm_count() * (per_sm[dev] > 0 ? per_sm[dev] : 1);
}

// Where the one-pass reductions leave the blocks' partial sums and count the blocks that are done:
// device memory of the module, zero when it loads (no allocation, no memset per launch: the
// outputs labkit.call allocates on a repeat are not zeroed). Every launch leaves its ticket at 0
// again. A launch takes the slot of its stream (lk_grid_slot), so launches on concurrent streams
// do not share a ticket unless their streams hash alike (16 slots).
constexpr int LK_GRID_SLOTS = 16;
constexpr int LK_GRID_BLOCKS = 2048;  // most blocks of a one-pass grid
__device__ float lk_grid_part[LK_GRID_SLOTS][LK_GRID_BLOCKS];
__device__ unsigned lk_grid_ticket[LK_GRID_SLOTS];

static inline int lk_grid_slot(cudaStream_t stream) {
  return int((uint64_t(reinterpret_cast<uintptr_t>(stream)) * 0x9E3779B97F4A7C15ull) >> 60);  // 16 slots
}

// The ticket: an atomic increment that wraps to 0 at the last block (ready for the next launch),
// acquire-release at GPU scope: it publishes this block's partial and, in the last block, makes
// every earlier block's visible. Two __threadfence() around a relaxed atomicInc did the same and
// cost ~0.4 us more per launch, the last block's fences sitting on the kernel's critical path (H100,
// 64 MiB read: 25.0 us with the fences, 24.6 with this, 23.5 without a finish; logs/c9ab59541530/floor.log).
__device__ __forceinline__ unsigned lk_ticket(unsigned* ticket, unsigned last) {
  unsigned old;
#if __CUDA_ARCH__ >= 700
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(ticket), "r"(last) : "memory");
#else
  __threadfence();
  old = atomicInc(ticket, last);
  __threadfence();
#endif
  return old;
}

// Called by every thread of a block once thread 0 has stored the block's part: thread 0 takes the
// ticket (its release publishes that store), and the block that takes the last one gets true in
// every thread; the barrier orders its threads' loads of the parts after thread 0's acquire. The
// parts are read from L2 (__ldcg), where the other SMs' writes are.
__device__ __forceinline__ bool lk_last_block(int slot) {
  __shared__ bool last;
  if (threadIdx.x == 0) last = lk_ticket(&lk_grid_ticket[slot], gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  return last;
}

// Called by every thread of every block with the block's sum (block_reduce_sum's result). Each
// block leaves its sum in its slot's part[blockIdx.x]; the block that takes the last ticket adds
// them in block order (the same total on every run, unlike float atomics) and returns true, with
// the total in every thread.
template <int THREADS>
__device__ __forceinline__ bool lk_last_block_sum(float block_sum, int slot, float* scratch, float& total) {
  float* part = lk_grid_part[slot];
  if (threadIdx.x == 0) part[blockIdx.x] = block_sum;
  if (!lk_last_block(slot)) return false;
  float s = 0.f;
  for (int i = threadIdx.x; i < int(gridDim.x); i += THREADS) s += __ldcg(part + i);
  total = block_reduce_sum<THREADS>(s, scratch);
  return true;
}
