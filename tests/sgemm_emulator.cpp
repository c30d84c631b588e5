// sgemm_async_kernel (kernels/sgemm.cu) on the CPU, for tests/test_sgemm_tuned_cpu.py: g++ compiles this
// file with the kernel's source (EMU_KERNEL: the kernel part of sgemm.cu, cut out by the test) and its
// tile (EMU_TILE = BM, BN, BK, WM, WN, TM, TN, STAGES; EMU_GROUP), under AddressSanitizer.
//
// The CUDA that the kernel uses is emulated: one std::thread per CUDA thread,
// __syncthreads as a std::barrier, dynamic shared memory as one buffer per block, and cp.async as
// copies whose data lands at issue or only when waited for (emu_defer): the two ends of what the
// hardware may do. A shadow of shared memory checks, at each wait, that no thread read a float in
// the barrier epochs [issue, wait] of a copy to it, and at each read, that no other thread's
// completed copy may still be landing (racecheck's rules for cp.async).
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
#define LK_WARP 32
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct emu_dim { unsigned x = 0, y = 0, z = 0; };
thread_local emu_dim threadIdx, blockIdx;
template <typename T> T ceil_div(T a, T b) { return (a + b - 1) / b; }
template <typename T> T __ldg(const T* p) { return *p; }
using std::min;

unsigned char* emu_smem;  // this block's dynamic shared memory
size_t emu_smem_bytes;
#define lk_dyn_smem emu_smem
std::barrier<>* emu_bar;
thread_local int emu_tid, emu_epoch;  // epoch: barriers this thread has passed in its block
inline void __syncthreads() { emu_bar->arrive_and_wait(); ++emu_epoch; }
inline uint64_t __cvta_generic_to_shared(const void* p) { return static_cast<const unsigned char*>(p) - emu_smem; }

struct EmuShadow { int w_tid = -1, w_from = -1, w_to = -1, r_tid = -1, r_epoch = -1; };
std::vector<EmuShadow> emu_shadow;
std::mutex emu_mu;
long emu_races = 0;
bool emu_defer = false;
inline void emu_race(const char* what, size_t f, int a, int b) {
  if (emu_races++ < 5) std::fprintf(stderr, "race: %s, shared float %zu, threads %d and %d\n", what, f, a, b);
}

struct EmuCopy { uint32_t dst; const float* src; int n; bool ok; int issued; };
thread_local std::vector<std::vector<EmuCopy>> emu_groups;  // committed, not yet waited for: oldest first
thread_local std::vector<EmuCopy> emu_open;                 // issued, not yet committed
inline void emu_data(const EmuCopy& c) {
  if (c.dst % (4 * c.n) || c.dst + 4 * c.n > emu_smem_bytes) {
    std::fprintf(stderr, "bad cp.async of %d B to shared byte %u\n", 4 * c.n, c.dst);
    std::abort();
  }
  float* d = reinterpret_cast<float*>(emu_smem + c.dst);
  for (int i = 0; i < c.n; ++i) d[i] = c.ok ? c.src[i] : 0.f;
}
template <int BYTES> inline void cp_async_zfill(uint32_t smem, const float* gmem, bool ok) {
  EmuCopy c{smem, gmem, BYTES / 4, ok, emu_epoch};
  if (!emu_defer) emu_data(c);
  emu_open.push_back(c);
}
inline void cp_async_commit() { emu_groups.push_back(emu_open); emu_open.clear(); }
template <int PENDING> inline void cp_async_wait() {
  while (int(emu_groups.size()) > PENDING) {
    std::lock_guard<std::mutex> g(emu_mu);
    for (auto& c : emu_groups.front()) {
      if (emu_defer) emu_data(c);
      for (size_t f = c.dst / 4; f < c.dst / 4 + c.n; ++f) {
        EmuShadow& s = emu_shadow[f];
        if (s.r_epoch >= c.issued) emu_race("a read while a copy to it was in flight", f, s.r_tid, emu_tid);
        s.w_tid = emu_tid; s.w_from = c.issued; s.w_to = emu_epoch;
      }
    }
    emu_groups.erase(emu_groups.begin());
  }
}
inline float4 lds4(const float* p) {
  const size_t f0 = size_t(reinterpret_cast<const unsigned char*>(p) - emu_smem) / 4;
  if (f0 % 4 || 4 * (f0 + 4) > emu_smem_bytes) { std::fprintf(stderr, "bad LDS.128 at float %zu\n", f0); std::abort(); }
  std::lock_guard<std::mutex> g(emu_mu);
  for (size_t f = f0; f < f0 + 4; ++f) {
    EmuShadow& s = emu_shadow[f];
    if (s.w_tid != emu_tid && s.w_from <= emu_epoch && emu_epoch <= s.w_to) emu_race("a read while a copy may land", f, s.w_tid, emu_tid);
    s.r_tid = emu_tid; s.r_epoch = emu_epoch;
  }
  return *reinterpret_cast<const float4*>(p);
}

#include EMU_KERNEL

// Runs the kernel for each shape given as M N K ... (the float4 kernel when N % 4 == 0, as the
// launcher does) and checks C exactly: integer inputs in [-8, 7] keep every partial sum exact in f32.
// Prints one line per shape; exit status 1 when any C element is wrong, any race was seen or a copy
// was never waited for. EMU_DEFER=1 in the environment: copies land when waited for.
int main(int argc, char** argv) {
  using S = AsyncShape<EMU_TILE>;
  emu_defer = std::getenv("EMU_DEFER") != nullptr;
  int bad_shapes = 0;
  for (int a = 1; a + 2 < argc; a += 3) {
    const int M = std::atoi(argv[a]), N = std::atoi(argv[a + 1]), K = std::atoi(argv[a + 2]);
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N, NAN);
    unsigned r = 12345u + M * 7 + N * 13 + K;
    auto rnd = [&] { r = r * 1664525u + 1013904223u; return float(int(r >> 28) - 8); };  // -8 .. 7
    for (auto& x : A) x = rnd();
    for (auto& x : B) x = rnd();
    const bool vec = N % 4 == 0;
    auto kernel = vec ? sgemm_async_kernel<EMU_TILE, EMU_GROUP, true> : sgemm_async_kernel<EMU_TILE, EMU_GROUP, false>;
    constexpr int tile[] = {EMU_TILE};  // BM, BN, ...
    const int blocks = ceil_div(M, tile[0]) * ceil_div(N, tile[1]);
    std::vector<unsigned char> smem(S::SMEM);
    long leftover = 0;
    for (int blk = 0; blk < blocks; ++blk) {
      std::memset(smem.data(), 0xff, smem.size());  // NaN: a read of a float no copy wrote shows in C
      emu_smem = smem.data();
      emu_smem_bytes = smem.size();
      emu_shadow.assign(smem.size() / 4, EmuShadow{});
      std::barrier<> bar(S::THREADS);
      emu_bar = &bar;
      std::vector<std::thread> ts;
      for (int t = 0; t < S::THREADS; ++t)
        ts.emplace_back([&, t] {
          threadIdx.x = t; blockIdx.x = blk; emu_tid = t; emu_epoch = 0;
          kernel(A.data(), B.data(), C.data(), M, N, K);
          std::lock_guard<std::mutex> g(emu_mu);
          leftover += emu_open.size() + emu_groups.size();
          emu_open.clear(); emu_groups.clear();
        });
      for (auto& t : ts) t.join();
    }
    long wrong = 0;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double ref = 0;
        for (int k = 0; k < K; ++k) ref += double(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
        const float c = C[size_t(i) * N + j];
        if (!(c == float(ref)) && wrong++ < 3) std::fprintf(stderr, "C[%d][%d] = %g, expected %g\n", i, j, c, ref);
      }
    std::printf("%dx%dx%d %s: %ld wrong, %ld races, %ld copies never waited for\n", M, N, K, vec ? "vec" : "scalar",
                wrong, emu_races, leftover);
    bad_shapes += wrong || emu_races || leftover;
    emu_races = 0;
  }
  return bad_shapes ? 1 : 0;
}
