"""GPU half of `labkit serve`: the real thing on this box's GPU 0 (dask-cuda worker, TLS, the guard
reading NVML, inline kernels built on the box before they queue), and a kernel that faults costing
its own rows and one worker restart."""
import pytest

from labkit.benchmarks.workshop_load import SOLUTION
from labkit.config import make_rule, plan, resolve
from labkit.inline_kernel import inline_variant
from labkit.records import ResultLog
from labkit.session import run

pytestmark = pytest.mark.gpu
TOKEN = "a-token-for-the-serve-gpu-test"
FAST = make_rule(budget_s=0.1, noise_target=0.02)
PACK = SOLUTION  # the load benchmark's solution kernel: one 16-byte access per thread, as f16x8_pack
FAULT = "__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) { *(volatile int*)0 = 1; }"


@pytest.mark.timeout(900)
def test_serve_measures_an_inline_kernel_on_a_quiet_gpu_and_a_fault_costs_its_rows():
    pytest.importorskip("dask_cuda")
    import torch

    from labkit.remote import ServeExecutor
    from labkit.serve.server import Server
    from labkit.workers import _close_pools

    _close_pools()  # earlier tests' worker pools in this process hold the GPU too: the guard would see them
    s = Server(TOKEN, host="127.0.0.1", port=0, board_port=0, gpus="0", guard_wait_s=3)
    ex = ServeExecutor(s.local_address, TOKEN, "gpu test")
    try:
        mine = inline_variant("add", "mine", PACK, "my_add", "f16", width=8, build=False)
        rows = run(plan("add", ["f16x8_pack", mine], "f16", ["4096x4096"], rule=FAST), ResultLog(), ex, progress=False)
        by = {r["variant"]: r for r in rows}
        assert {r["status"] for r in rows} == {"ok"} and by["mine"]["serve_build_s"] > 0
        assert 0.8 < by["mine"]["time_us"] / by["f16x8_pack"]["time_us"] < 1.25  # the same access pattern
        here = 1 if torch.cuda.is_initialized() else 0  # this test process's own context is another process
        for r in rows:
            assert r["gpu_other_procs"] == here and 0 < r["gpu_temp_c"] < 100 and r["gpu_slowdown"] is not None
            assert r["gpu_check"] in ("ok", "waited") if not here else r["gpu_check"].startswith("busy: 1 other")
        boom = inline_variant("add", "boom", FAULT, "my_add", "f16", width=8, build=False)
        rows = run(plan("add", ["f16x8", boom, "f16x8_pack"], "f16", ["1024x1024"], rule=FAST) +
                   [resolve("add", boom, "f16", "1x7", timed=False)], ResultLog(), ex, progress=False)
        by = {(r["variant"], r["shape"]): r for r in rows}
        lost, again = by[("boom", "1024x1024")], by[("boom", "1x7")]
        assert lost["status"] == "error" and "illegal" in lost["error"].lower() and lost["context_lost"]
        assert again["worker"] == "faulted before" and "not run" in again["error"]
        assert {by[(n, "1024x1024")]["status"] for n in ("torch", "f16x8", "f16x8_pack")} == {"ok"}
        after = run(plan("add", ["f16x8_pack"], "f16", ["1024x1024"], rule=FAST), ResultLog(), ex, progress=False)
        assert {r["status"] for r in after} == {"ok"}  # the restarted worker measures again
    finally:
        ex.close()
        s.close()
