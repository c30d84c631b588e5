// Issue 26: the global-atomic histogram at 256 bins read 2.09x its old time on both GPUs (torch's
// index_add_ too), at 16 bins not. Does the time depend on where the 256 counts (1 KiB, 8 lines) sit?
// histogram_kernel<4, 16>'s shape: one int4 per thread, four global atomicAdds; 2^24 values.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void atomics(const int4* __restrict__ x, int* hist, int64_t packs) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < packs) {
    const int4 v = x[t];
    atomicAdd(hist + v.x, 1); atomicAdd(hist + v.y, 1); atomicAdd(hist + v.z, 1); atomicAdd(hist + v.w, 1);
  }
}

int main() {
  const int64_t n = int64_t(1) << 24, packs = n / 4;
  int* x; char* pool;
  CK(cudaMalloc(&x, n * 4));
  CK(cudaMalloc(&pool, 64 << 20));
  std::vector<int> hx(n);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  printf("pool at %p (offset 0 is %llu KiB into a 2 MiB page)\n", (void*)pool, (unsigned long long)(((uintptr_t)pool) % (2 << 20)) >> 10);
  for (int bins : {256, 16}) {
    srand(7);
    for (int64_t i = 0; i < n; ++i) hx[i] = rand() % bins;
    CK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<int64_t> offs;
    for (int64_t o = 0; o < (64 << 10); o += (bins == 256 ? 512 : 4096)) offs.push_back(o);
    for (int64_t o : {1 << 20, 2 << 20, 3 << 20, 5 << 20, 8 << 20, 13 << 20, 21 << 20, 34 << 20, 55 << 20}) offs.push_back(o);
    std::vector<float> all;
    for (int64_t o : offs) {
      int* h = reinterpret_cast<int*>(pool + o);
      std::vector<float> v;
      for (int r = 0; r < 3; ++r) {
        CK(cudaMemset(h, 0, bins * 4));
        CK(cudaEventRecord(e0)); atomics<<<(packs + 255) / 256, 256>>>((const int4*)x, h, packs); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1e3f);
      }
      std::sort(v.begin(), v.end());
      std::vector<int> got(bins); CK(cudaMemcpy(got.data(), h, bins * 4, cudaMemcpyDeviceToHost));
      long long s = 0; for (int c : got) s += c;
      printf("bins %4d  counts at pool+%8lld B (%6lld KiB)  %9.1f us%s\n", bins, (long long)o, (long long)(o >> 10), v[1],
             s == n ? "" : "  WRONG SUM");
      all.push_back(v[1]);
    }
    std::sort(all.begin(), all.end());
    printf("bins %d: min %.1f  median %.1f  max %.1f us over %zu placements\n", bins, all.front(), all[all.size() / 2], all.back(), all.size());
  }
  return 0;
}
