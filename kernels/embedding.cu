// Embedding lookup, out[r, :] = weight[idx[r], :] (CATALOG §3, seed 004). One block per output
// row; its threads copy the row in packs. One template covers every variant: T = element type,
// N = elements per pack, ACCESS = bytes per load/store instruction (N=4, ACCESS=4 is the seed's
// "x4": four scalar copies; ACCESS=16 its "pack"). Beyond the seed, embedding_rows_kernel takes
// ROWS rows per block: each thread loads its pack of every row before storing any (ROWS
// independent 128-bit loads in flight).
// Unlike the seed (blockDim = EmbSize / N, no checks), any EmbSize works: rows loop over their
// packs, and a row whose index is outside [0, MaxV) is written as zeros, never read (the op's
// validate hook reports such indices before a run). Vector path: EmbSize % N == 0 and weight and
// out misaligned alike, so every row splits the same way (scalar head | packs | scalar tail);
// otherwise the N=1 kernel runs (LK_PATH_FALLBACK).
#include "labkit.cuh"

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

template <typename T, int N, int ACCESS, int ROWS = 1>
static int launch_embedding(const lk_args* args, cudaStream_t stream) {
  const int* idx = lk_ptr<const int>(args->t[0]);
  const T* weight = lk_ptr<const T>(args->t[1]);
  T* out = lk_ptr<T>(args->t[2]);
  const int64_t rows = args->t[0].numel;
  const int64_t max_v = args->t[1].size[0];
  const int64_t emb = max_v > 0 ? args->t[1].numel / max_v : 0;
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

// The exported launchers (`int embedding_<variant>(const lk_args*, cudaStream_t)`) are generated from the
// variant lines of labkit/ops/embedding.py (labkit.build.export_source): `labkit list` prints them.
