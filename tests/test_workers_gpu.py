"""GPU half: a kernel that faults poisons only its worker; the session goes on."""
import pytest

import labkit
from labkit.config import make_rule, plan, resolve
from labkit.records import ResultLog
from labkit.session import run
from labkit.workers import WorkerPool

pytestmark = pytest.mark.gpu
FAST = make_rule(budget_s=0.05, noise_target=0.02)

BOOM = """__global__ void boom(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i + (int64_t(1) << 40)] = a[i] + b[i];   // far outside any allocation
}"""


def test_a_faulting_kernel_costs_one_worker_not_the_session(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    labkit.inline("add", "boom", BOOM, "boom", "f32")
    pool = WorkerPool(peak=False)
    try:
        log = ResultLog(tmp_path / "rows.jsonl")
        configs = [resolve("add", "boom", "f32", "256x256", rule=FAST), resolve("add", "f32x4", "f32", "256x256", rule=FAST)]
        rows = run(configs, log, pool, title="bench add", progress=False)
        bad, good = rows[-2], rows[-1]
        assert bad["status"] == "error" and "illegal" in bad["error"].lower() and bad["context_lost"]
        assert bad["variant"] == "boom" and "boom" in (bad.get("kernel") or bad["error"])
        assert good["status"] == "ok" and good["time_us"] > 0
        assert pool.restarts == 1
        # the same session: a sweep row and an explorer-style measurement still work
        more = run(plan("add", ["f16x8_pack"], "f16", ["1024x1024"], rule=FAST), ResultLog(), pool, progress=False)
        assert all(r["status"] == "ok" for r in more)
    finally:
        pool.close()
    # and this process's own context was never touched
    import torch

    x = torch.ones(8, device="cuda")
    assert labkit.call("add", "f32x4", x, x, sync=True).sum().item() == 16
