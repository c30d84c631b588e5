// Harness helpers compiled with the catalog: the CUDA error string for a launcher's negative
// return code (the torch binding is built without CUDA headers, so it cannot call this itself).
#include "labkit.cuh"

LK_EXPORT const char* lk_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }
