// Embedding lookup, out[r, :] = weight[idx[r], :] (CATALOG §3, seed 004).
//   f32 / f16                 embedding_kernel<T, 1, sizeof(T)>: one element per thread step
//   f32x4 / f16x8             embedding_kernel<T, N, sizeof(T)>: the seed's "x4": N scalar copies
//   f32x4_pack / f16x8_pack   embedding_kernel<T, N, 16>: one 128-bit load and store per step
//   f32x4_pack_r4 / ..._r4    embedding_rows_kernel<T, N, 4>: 4 rows per block
//   f32x4_flat / f16x8_flat   embedding_flat_kernel<T, N, 8>: the output as one flat list of packs
// embedding_kernel: one block per output row; its threads copy the row in packs (N = elements per
// pack, ACCESS = bytes per load/store instruction). embedding_rows_kernel: ROWS rows per block,
// each thread loads its pack of every row before storing any (ROWS 128-bit loads in flight).
// What held them below the copy peak on the H200 at 30000 x 9000 x 1000 (f32, 80 % of the peak,
// torch's gather the same): a block per row (or 4) waits for its index, then for its row, then
// leaves; 9000 rows are ~8 waves of such blocks (or ~2.1 of r4's, the last one 13 % full), with a
// few KiB in flight per block. embedding_flat_kernel spreads SeqLen x EmbSize / N packs evenly over
// a grid the GPU holds at once: each thread takes up to 8 packs a round (grid-stride apart),
// copies them into its shared-memory slots (cp.async) with the next round's row indices (hoisted:
// one memory latency per round, not two), then stores them. The rounds are balanced: none is a
// nearly empty last one.
// Unlike the seed (blockDim = EmbSize / N, no checks), any EmbSize works: rows loop over their
// packs, and a row whose index is outside [0, MaxV) is written as zeros, never read (the op's
// validate hook reports such indices before a run). Vector path: EmbSize % N == 0 and weight and
// out misaligned alike, so every row splits the same way (scalar head | packs | scalar tail);
// otherwise the N=1 kernel runs (LK_PATH_FALLBACK). The flat kernel takes 16-byte aligned rows
// (no head or tail) and hands other shapes to embedding_kernel.
#include "labkit.cuh"
#include "lk_grid.cuh"

template <typename T, int N, int ACCESS>
__global__ void embedding_kernel(const int* __restrict__ idx, const T* __restrict__ weight, T* __restrict__ out,
                                 int64_t max_v, int64_t emb, lk_split s) {
  const int64_t row = blockIdx.x;
  const int64_t id = idx[row];
  T* o = out + row * emb;
  if (id < 0 || id >= max_v) {  // out of the table: zeros instead of a wild read
    for (int j = threadIdx.x; j < int(emb); j += blockDim.x) o[j] = lk_from_float<T>(0.f);
    return;
  }
  const T* w = weight + id * emb;
  // int, not int64_t, counters: with a 64-bit counter nvcc splits the 128-bit store into 4 x 32-bit
  for (int p = threadIdx.x; p < int(s.packs); p += blockDim.x) {
    Pack<T, N> r;
    lk_load<ACCESS>(r, w + s.head + p * N);
    lk_store<ACCESS>(o + s.head + p * N, r);
  }
  for (int j = threadIdx.x; j < int(s.head + s.tail); j += blockDim.x) {  // scalar edges
    const int64_t i = lk_edge_index(s, N, j);
    o[i] = w[i];
  }
}

// ROWS rows per block: the index loads and then the ROWS pack loads are issued back to back, so a
// thread waits for one memory latency per ROWS rows instead of two per row.
template <typename T, int N, int ROWS>
__global__ void embedding_rows_kernel(const int* __restrict__ idx, const T* __restrict__ weight, T* __restrict__ out,
                                      int64_t rows, int64_t max_v, int64_t emb, lk_split s) {
  const int64_t row0 = int64_t(blockIdx.x) * ROWS;
  int64_t id[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) id[r] = row0 + r < rows ? idx[row0 + r] : -1;
  for (int p = threadIdx.x; p < int(s.packs); p += blockDim.x) {
    Pack<T, N> v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
      if (id[r] >= 0 && id[r] < max_v) lk_load<sizeof(v[r])>(v[r], weight + id[r] * emb + s.head + p * N);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r >= rows) break;
      if (!(id[r] >= 0 && id[r] < max_v)) v[r] = Pack<T, N>{};  // out of the table: zeros, never read
      lk_store<sizeof(v[r])>(out + (row0 + r) * emb + s.head + p * N, v[r]);
    }
  }
  for (int j = threadIdx.x; j < int(s.head + s.tail); j += blockDim.x) {  // scalar edges
    const int64_t i = lk_edge_index(s, N, j);
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
      if (row0 + r < rows) out[(row0 + r) * emb + i] = id[r] >= 0 && id[r] < max_v ? weight[id[r] * emb + i] : T{};
  }
}


// The flat list: pack i of the output is out + i * N (rows are contiguous), and comes from row
// idx[i / P] of the table, column i % P (P = EmbSize / N packs per row). Each thread walks its
// packs' (row, column) by adding the grid's stride as (rows, columns) with a carry: no division.
constexpr int kFlatThreads = 256;
struct flat_plan {
  int64_t total;            // SeqLen x P packs
  int P;                    // packs per row
  int per_round;            // packs per thread per round (<= U, so the rounds come out even)
  unsigned step_r, step_c;  // the grid's stride in (rows, columns)
  unsigned round_r, round_c;  // per_round x the stride in (rows, columns)
};

__device__ __forceinline__ void flat_step(unsigned& r, unsigned& c, unsigned dr, unsigned dc, unsigned P) {
  r += dr, c += dc;
  if (c >= P) c -= P, ++r;
}

// Copies global -> shared that hold no registers (cp.async, sm_80+): 16 bytes, or 16 zero bytes
// when `keep` is false (src-size 0: nothing is read); and one 4-byte index.
__device__ __forceinline__ void cp_async16_or_zero(void* smem, const void* gmem, bool keep) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(keep ? 16 : 0));
#else
  *static_cast<uint4*>(smem) = keep ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_async4(int* smem, const int* gmem) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
#else
  *smem = *gmem;
#endif
}

// Each round: the thread's packs go global -> shared with cp.async (up to U in flight, no
// registers held) together with the next round's row indices, one wait, then the packs go shared
// -> global. Loaded into registers, ptxas put stores between the loads, each waiting for its pack
// (1-2 loads in flight, not 8); indices loaded into registers were moved after the wait. A
// thread reads back only its own slots, after its own wait: no barrier.
template <typename T, int N, int U>
__global__ void __launch_bounds__(kFlatThreads) embedding_flat_kernel(const int* __restrict__ idx,
                                                                      const T* __restrict__ weight,
                                                                      T* __restrict__ out, int64_t max_v,
                                                                      int64_t emb, flat_plan f) {
  __shared__ uint4 stage[U][kFlatThreads];  // [u][thread]: a warp's 16-byte slots side by side
  __shared__ int ids[U][kFlatThreads];
  const int64_t t = int64_t(blockIdx.x) * kFlatThreads + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * kFlatThreads;
  unsigned r0 = unsigned(t / f.P), c0 = unsigned(t % f.P);  // the round's first pack
  unsigned c[U];                                            // the round's columns
  auto fetch_ids = [&](int64_t i) {  // the round at pack i: columns, and its rows' indices on their way
    unsigned rr = r0, cc = c0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      c[u] = cc;
      if (i + u * stride < f.total) cp_async4(&ids[u][threadIdx.x], idx + rr);
      flat_step(rr, cc, f.step_r, f.step_c, f.P);
    }
  };
  int64_t i = t;
  fetch_ids(i);
  lk_cp_async_wait_all();
  while (i < f.total) {
#pragma unroll
    for (int u = 0; u < U; ++u) {  // a row outside the table: zeros, nothing read
      if (u < f.per_round && i + u * stride < f.total) {
        const int id = ids[u][threadIdx.x];
        const bool ok = id >= 0 && id < max_v;
        cp_async16_or_zero(&stage[u][threadIdx.x], weight + (ok ? int64_t(id) : 0) * emb + int64_t(c[u]) * N, ok);
      }
    }
    const int64_t here = i;
    i += int64_t(f.per_round) * stride;
    flat_step(r0, c0, f.round_r, f.round_c, f.P);
    fetch_ids(i);  // the next round's indices fly with this round's packs
    lk_cp_async_wait_all();
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u < f.per_round && here + u * stride < f.total)
        *reinterpret_cast<uint4*>(out + (here + u * stride) * N) = stage[u][threadIdx.x];
  }
}

// What every embedding launcher reads from its arguments: t[0] = idx (rows of them), t[1] = weight
// (max_v x emb), t[2] = out (rows x emb).
template <typename T>
struct EmbArgs {
  const int* idx;
  const T* weight;
  T* out;
  int64_t rows, max_v, emb;
  explicit EmbArgs(const lk_args* args)
      : idx(lk_ptr<const int>(args->t[0])), weight(lk_ptr<const T>(args->t[1])), out(lk_ptr<T>(args->t[2])),
        rows(args->t[0].numel), max_v(args->t[1].size[0]), emb(max_v > 0 ? args->t[1].numel / max_v : 0) {}
};

template <typename T, int N, int ACCESS, int ROWS = 1>
static int launch_embedding(const lk_args* args, cudaStream_t stream) {
  const auto [idx, weight, out, rows, max_v, emb] = EmbArgs<T>(args);
  const void* ptrs[2] = {weight, out};
  lk_split s = lk_make_split(emb, N, sizeof(T), ptrs, 2);
  const bool vector = s.vector && emb % N == 0;  // rows then start at the same misalignment
  if (!vector) s = lk_make_split(emb, 1, sizeof(T), ptrs, 2);
  // threads: enough for one pass over the row's packs (and edges), 32..256
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  const int threads = int(work >= 256 ? 256 : ceil_div<int64_t>(work > 0 ? work : 1, LK_WARP) * LK_WARP);
  if (!vector) {
    embedding_kernel<T, 1, sizeof(T)><<<unsigned(rows), threads, 0, stream>>>(idx, weight, out, max_v, emb, s);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  if constexpr (ROWS > 1) {
    embedding_rows_kernel<T, N, ROWS><<<unsigned(ceil_div<int64_t>(rows, ROWS)), threads, 0, stream>>>(
        idx, weight, out, rows, max_v, emb, s);
  } else {
    embedding_kernel<T, N, ACCESS><<<unsigned(rows), threads, 0, stream>>>(idx, weight, out, max_v, emb, s);
  }
  return lk_launch_status();
}

// The flat kernel for 16-byte aligned rows (EmbSize % N == 0, weight and out 16-byte aligned),
// else embedding_kernel (vector path with scalar edges, or the N=1 fallback). Grid: at most what
// the GPU holds at once; rounds of up to U packs per thread, evened out.
template <typename T, int N, int U>
static int launch_embedding_flat(const lk_args* args, cudaStream_t stream) {
  const auto [idx, weight, out, rows, max_v, emb] = EmbArgs<T>(args);
  const bool flat = emb % N == 0 && emb / N < (int64_t(1) << 30) && reinterpret_cast<uintptr_t>(weight) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (!flat) return launch_embedding<T, N, 16>(args, stream);
  flat_plan f{};
  f.P = int(emb / N);
  f.total = rows * f.P;
  if (f.total == 0) return lk_launch_status();
  int64_t blocks = ceil_div<int64_t>(f.total, int64_t(kFlatThreads) * U);
  const int64_t cap = lk_resident_grid<embedding_flat_kernel<T, N, U>>(kFlatThreads);
  blocks = blocks < cap ? blocks : cap;
  const int64_t stride = blocks * kFlatThreads;
  const int64_t rounds = ceil_div<int64_t>(f.total, stride * U);
  f.per_round = int(ceil_div<int64_t>(f.total, stride * rounds));
  f.step_r = unsigned(stride / f.P), f.step_c = unsigned(stride % f.P);
  f.round_r = unsigned(stride * f.per_round / f.P), f.round_c = unsigned(stride * f.per_round % f.P);
  embedding_flat_kernel<T, N, U><<<unsigned(blocks), kFlatThreads, 0, stream>>>(idx, weight, out, max_v, emb, f);
  return lk_launch_status();
}

// The exported launchers (`int embedding_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/embedding.py (labkit.build.export_source): `labkit list` prints them.
