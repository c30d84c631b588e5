// labkit's launcher ABI, plain C (no torch): every kernel file exports its launchers through it, and
// labkit/launch.py calls them through ctypes (its LkTensor and LkArgs mirror the two structs below).
// Every exported launcher has the signature `int name(const lk_args*, cudaStream_t)`.
#pragma once
#include <stdint.h>

#define LK_MAX_TENSORS 8
#define LK_MAX_PARAMS 8

typedef struct {
  void* data;          // device pointer of the first element
  int64_t numel;
  int64_t size[4];     // logical shape (ndim <= 4), row-major contiguous
  int32_t ndim;
  int32_t itemsize;
} lk_tensor;

typedef struct {
  lk_tensor t[LK_MAX_TENSORS];  // inputs first, outputs last (order fixed per op)
  int32_t nt;
  int64_t i[LK_MAX_PARAMS];     // integer parameters (op specific)
  double f[LK_MAX_PARAMS];      // float parameters (op specific)
} lk_args;

// Launcher return codes: >= 0 success (which code path ran), < 0 a CUDA error (negated).
#define LK_PATH_VECTOR 0
#define LK_PATH_FALLBACK 1  // misaligned pointers: the scalar kernel ran instead
