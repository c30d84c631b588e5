"""GPU half of sgemm tuned (`pytest -m gpu tests/test_sgemm_tuned_gpu.py`): every tile of the
tune-sgemm sweep against the float64 product at the op's odd shapes, on aligned and misaligned views
(the float4 and the scalar kernel), and tuned in a CUDA graph (hot), including a tile whose shared
memory is above 48 KiB (its attribute is set before any capture)."""
import pytest

from labkit.config import make_rule, resolve
from labkit.ops import sgemm as sg
from labkit.registry import get_op
from labkit.runner import Runner
from labkit.sweeps import SGEMM_TILES

pytestmark = pytest.mark.gpu

OP = get_op("sgemm")
FAST = make_rule(min_samples=5, max_samples=50, budget_s=0.05)
CASES = [(t, s, off) for t in SGEMM_TILES for s in OP.testing.shapes for off in (0, 1)]


@pytest.fixture(scope="module")
def runner():
    r = Runner(peak=False, kernel_time=False)
    r.prebuild([resolve("sgemm", "tuned", shape="64x64x64", axes=t or None) for t in SGEMM_TILES])  # side by side
    return r


def _id(t: dict) -> str:
    """tile_bn256_wn64_tn16, tile_shipped: a name `pytest -k` can select."""
    return "tile_" + ("_".join(f"{k}{v}" for k, v in t.items()) or "shipped")


@pytest.mark.parametrize("tile,shape,offset", CASES,
                         ids=[f"{_id(t)}-{'x'.join(map(str, s))}-off{o}" for t, s, o in CASES])
def test_every_sweep_tile_matches_the_float64_product(runner, tile, shape, offset):
    r = runner.run(resolve("sgemm", "tuned", shape=shape, offset=offset, axes=tile or None, timed=False))
    assert r["status"] == "ok", r.get("error")
    assert r["path"] == ("vector" if offset == 0 and shape[1] % 4 == 0 else "fallback")


@pytest.mark.parametrize("tile", [{}, {"bk": 16, "stages": 4}], ids=["tile_shipped", "tile_bk16_stages4-66KiB"])
def test_tuned_in_a_cuda_graph(runner, tile):
    assert tile == {} or sg.smem_bytes(sg.tile(tile)) > 48 << 10
    r = runner.run(resolve("sgemm", "tuned", shape="1000x1000x1000", mode="hot", axes=tile or None, rule=FAST))
    assert r["status"] == "ok" and r["recheck"] == "ok" and r["time_us"] > 0, r.get("error")
