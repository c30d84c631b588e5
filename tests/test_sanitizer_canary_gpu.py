"""GPU half: the race planted for the racecheck step of labkit.benchmarks.gpu_tests. It runs in a
pytest-xdist worker like the tests racecheck checks, so the step passes only when racecheck reports
it (it watched those processes) and nothing else (gpu_tests.summary). Run plainly it only shows
that the planted kernel builds and launches."""
import pytest

pytestmark = pytest.mark.gpu

# a shared-memory race: each thread reads a slot another warp writes, with no __syncthreads() between
RACE = """__global__ void labkit_canary_race(const float* a, const float* b, float* c, int64_t n) {
  __shared__ float s[1024];
  int t = threadIdx.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + t;
  s[t] = i < n ? a[i] : 0.f;
  float v = s[(t + 32) % blockDim.x];  // planted: written by the next warp, maybe not yet
  if (i < n) c[i] = a[i] + b[i] + v;
}"""


def test_sanitizer_canary_race():
    import torch

    import labkit

    labkit.inline("add", "canary_race", RACE, "labkit_canary_race", "f32")
    x = torch.ones(1 << 16, device="cuda")
    y = labkit.call("add", "canary_race", x, x, sync=True)  # its values are racy by design
    assert y.shape == x.shape
