"""Issue 25 probe: what fixed cost a read of 64 MiB pays inside the kernel, whatever the kernel does.
Read-only kernels (no finish), the one-pass reduce's finish (fence vs acq_rel atomic), an empty
kernel of the same grid, labkit's reduce_sum f32x4_1pass, torch.sum; rotating and cold, CUPTI time.
"""
import json, os, sys, time
import numpy as np, torch, cupy
import labkit
from labkit.timing import measure
from labkit.stats import StopRule
SRC = r'''
extern "C" __global__ void empty_k(float* part) { if (threadIdx.x == 5000) part[0] = 0.f; }

__device__ __forceinline__ float block_sum(float v, float* sh) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
  if (threadIdx.x < 32) for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

template <int U> __device__ __forceinline__ float body(const float4* __restrict__ x, long long packs) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  float a0 = 0.f, a1 = 0.f; long long p = t;
  for (; p + (U - 1) * stride < packs; p += U * stride) {
    float4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) r[u] = x[p + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) { a0 += r[u].x + r[u].y; a1 += r[u].z + r[u].w; }
  }
  for (; p < packs; p += stride) { float4 r = x[p]; a0 += r.x + r.y; a1 += r.z + r.w; }
  return a0 + a1;
}

// no finish: each block's sum to part[block]
extern "C" __global__ void __launch_bounds__(1024, 2) read4(const float4* x, float* part, long long packs) {
  __shared__ float sh[32];
  float s = block_sum(body<4>(x, packs), sh);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(1024, 2) read8(const float4* x, float* part, long long packs) {
  __shared__ float sh[32];
  float s = block_sum(body<8>(x, packs), sh);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(256, 8) read4_256(const float4* x, float* part, long long packs) {
  __shared__ float sh[32];
  float s = block_sum(body<4>(x, packs), sh);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
// the shipped finish: fence, atomicInc ticket, fence, last block adds the partials
extern "C" __global__ void __launch_bounds__(1024, 2) fence4(const float4* x, float* part, long long packs,
                                                             unsigned* ticket, float* y) {
  __shared__ float sh[32]; __shared__ bool last;
  float s = block_sum(body<4>(x, packs), sh);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = s; __threadfence();
    last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1; __threadfence();
  }
  __syncthreads();
  if (!last) return;
  float v = 0.f;
  for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) v += __ldcg(part + i);
  __syncthreads();
  v = block_sum(v, sh);
  if (threadIdx.x == 0) *y = v;
}
// the same with one acq_rel atomic and no fences
extern "C" __global__ void __launch_bounds__(1024, 2) acqrel4(const float4* x, float* part, long long packs,
                                                              unsigned* ticket, float* y) {
  __shared__ float sh[32]; __shared__ bool last;
  float s = block_sum(body<4>(x, packs), sh);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = s;
    unsigned old, lim = gridDim.x - 1;
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(ticket), "r"(lim) : "memory");
    last = old == lim;
  }
  __syncthreads();
  if (!last) return;
  float v = 0.f;
  for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) v += __ldcg(part + i);
  __syncthreads();
  v = block_sum(v, sh);
  if (threadIdx.x == 0) *y = v;
}
'''
mod = cupy.RawModule(code=SRC, options=("-std=c++17",))
K = {n: mod.get_function(n) for n in ["empty_k", "read4", "read8", "read4_256", "fence4", "acqrel4"]}
props = torch.cuda.get_device_properties(0)
SM = props.multi_processor_count
L2 = props.L2_cache_size
print(torch.cuda.get_device_name(), "SMs", SM, "L2", L2, flush=True)
part = torch.zeros(4096, device="cuda"); ticket = torch.zeros(4, dtype=torch.int32, device="cuda"); y = torch.zeros(1, device="cuda")
P = lambda t: np.uint64(t.data_ptr())

def launcher(name, x, threads, per_sm, U):
    k = K[name]; packs = x.numel() // 4
    blocks = max(1, min(SM * per_sm, -(-packs // (threads * U))))
    extra = (P(ticket), P(y)) if name in ("fence4", "acqrel4") else ()
    args = (P(x), P(part), np.int64(packs)) + extra
    if name == "empty_k":
        blocks, args = SM * per_sm, (P(part),)
    def go():
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            k((blocks,), (threads,), args)
    return go

CFG = {"empty_k": (1024, 2, 4), "read4": (1024, 2, 4), "read8": (1024, 2, 8), "read4_256": (256, 8, 4),
       "fence4": (1024, 2, 4), "acqrel4": (1024, 2, 4)}
rows = []
for mib in [int(m) for m in os.environ.get("SIZES", "32 64 128 256 1024").split()]:
    n = mib * 2**20 // 4
    sets = max(1, -(-3 * L2 // (n * 4)))
    xs = [torch.randn(n, device="cuda") for _ in range(sets)]
    ref = [x.double().sum().item() for x in xs]
    for mode in ["rotating", "cold"]:
        subjects = dict((name, [launcher(name, x, *CFG[name]) for x in xs]) for name in CFG)
        subjects["labkit f32x4_1pass"] = [(lambda x=x: labkit.call("reduce_sum", "f32x4_1pass", x)) for x in xs]
        subjects["torch.sum"] = [(lambda x=x: torch.sum(x)) for x in xs]
        for name, fns in subjects.items():
            if mode == "cold":
                fns = fns[:1]
            m = measure(fns, mode=mode, rule=StopRule(budget_s=0.15), kernels=True)
            k = (m.kernels or {}).get("kernel_us")
            t = m.summary.median * 1e6
            row = dict(mib=mib, mode=mode, name=name, time_us=round(t, 3), kernel_us=k and round(k, 3),
                       gbps_events=round(n * 4 / t / 1e3, 1), gbps_kernel=k and round(n * 4 / k / 1e3, 1), sets=len(fns))
            rows.append(row); print(row, flush=True)
    # correctness of the finishing kernels on the first set
    for name in ("fence4", "acqrel4"):
        launcher(name, xs[0], *CFG[name])(); torch.cuda.synchronize()
        print("check", name, mib, y.item(), ref[0], abs(y.item() - ref[0]) / max(1, abs(ref[0])) < 1e-4, flush=True)
    del xs
out = os.environ.get("OUT", ".")
json.dump(rows, open(f"{out}/res/floor-{torch.cuda.get_device_name().replace(' ', '_')}.json", "w"), indent=1)
