"""GPU half: errors planted for the sanitizer steps of labkit.benchmarks.gpu_tests. They run in
pytest-xdist's workers like the tests the sanitizer checks, so a step passes only when its sanitizer
reports the planted error (it watched those processes) and nothing else (gpu_tests.verdict). Run
plainly they only show that the planted kernels build and launch."""
import subprocess
import sys

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

# one thread writes far past the output: memcheck must name it
OOB = """__global__ void labkit_canary_oob(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
  if (i == 0) c[n + (int64_t(1) << 40)] = 0.f;  // planted
}"""


def test_sanitizer_canary_race():
    import torch

    import labkit

    labkit.inline("add", "canary_race", RACE, "labkit_canary_race", "f32")
    x = torch.ones(1 << 16, device="cuda")
    y = labkit.call("add", "canary_race", x, x, sync=True)  # its values are racy by design
    assert y.shape == x.shape


def test_sanitizer_canary_oob():
    import labkit

    labkit.inline("add", "canary_oob", OOB, "labkit_canary_oob", "f32")  # built here: the child finds it cached
    # launched in a process of its own: the fault ends that process's CUDA context, not this worker's
    code = ("import torch, labkit\n"
            f"labkit.inline('add', 'canary_oob', {OOB!r}, 'labkit_canary_oob', 'f32')\n"
            "x = torch.ones(1024, device='cuda')\n"
            "labkit.call('add', 'canary_oob', x, x, sync=True)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    # an illegal address plainly; under memcheck the launch fails after its report
    assert r.returncode != 0 and "Traceback" in r.stderr, "the planted write went unnoticed:\n" + r.stderr[-2000:]
