"""CPU half of sgemm's warptile_async and tuned (issue 25): tuned's tile as tuning axes (declared,
refused with the constraint named, in step with kernels/sgemm.cu's static_asserts), its per-GPU
default, the tune-sgemm sweep (every tile compiled for sm_90 without spills, at the occupancy it was
designed for), and the kernel itself run on a CPU emulation of CUDA (tests/sgemm_emulator.cpp): C
exact, no shared-memory race, no out-of-bounds access, with cp.async copies landing at issue or only
when waited for. No GPU needed."""
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.build import family_text
from labkit.config import plan, resolve
from labkit.errors import ConfigError
from labkit.ops import sgemm as sg
from labkit.paths import KERNELS_DIR
from labkit.registry import get_op
from labkit.sweeps import SGEMM_SHAPES, SGEMM_TILES, get_sweep

SRC = family_text("sgemm.cu")
TESTS = Path(__file__).resolve().parent
OP = get_op("sgemm")
TUNED = OP.variant("tuned")
KEYS = list(sg.DEFAULT_TILE)


def _axes(t: dict) -> tuple:
    return tuple(sorted(t.items()))


# ---- registration ---------------------------------------------------------------------------------
def test_tuned_declares_its_tile_as_axes():
    assert list(OP.axes) == KEYS and all(d == 0 and 0 in vals for d, vals in OP.axes.values())
    assert all(sg.DEFAULT_TILE[k] in vals for k, (_, vals) in OP.axes.items())
    assert dict(TUNED.args) == sg.DEFAULT_TILE and TUNED.kernel == OP.variant("warptile_async").kernel
    assert OP.variant("warptile_async").launch == sg.TILE_LAUNCH.format(**sg.DEFAULT_TILE)


def test_tuned_ships_one_tile_per_gpu_family_in_the_kernel_files_order():
    families = re.findall(r'"([^"]+)"', re.search(r"SGEMM_GPUS\[\] = \{([^}]*)\}", SRC).group(1))
    assert families == list(sg.GPU_DEFAULTS)
    tiles = [sg.tile(sg.GPU_DEFAULTS[f]) for f in families] + [sg.DEFAULT_TILE]
    assert TUNED.launch == "launch_by_gpu<" + ", ".join(sg.TILE_LAUNCH.format(**t) for t in tiles) + ">"
    for f, t in sg.GPU_DEFAULTS.items():
        assert not sg.axis_rule(TUNED, t), f"GPU_DEFAULTS[{f!r}] = {t}: {sg.axis_rule(TUNED, t)}"
    assert sg.tile_of("NVIDIA H100 80GB HBM3") == sg.tile(sg.GPU_DEFAULTS["H100"])
    assert sg.tile_of("NVIDIA H200") == sg.tile(sg.GPU_DEFAULTS["H200"])
    assert sg.tile_of("NVIDIA A100-SXM4-80GB") == sg.tile_of(None) == sg.DEFAULT_TILE


def test_a_tile_builds_its_own_launcher_unset_axes_from_the_default_tile():
    cfg = resolve("sgemm", "tuned", shape="256x256x64", axes={"bn": 256, "wn": 64, "tn": 16, "stages": 3})
    assert cfg.variant_s == "tuned[bn=256,stages=3,tn=16,wn=64]"  # 3 is DEFAULT_TILE's, but set: explicit
    assert OP.export(TUNED, cfg.axes) == ("sgemm_tuned__bn256__stages3__tn16__wn64",
                                          "launch_async<128, 256, 8, 64, 64, 8, 16, 3, 8>")
    assert resolve("sgemm", "tuned", axes={"bm": 0}).axes == ()  # 0: the shipped (per-GPU) tile
    assert sg.threads(sg.tile(cfg.axes)) == 256 and sg.threads(sg.tile({"wn": 64, "tn": 16})) == 128


# ---- refusals, and the kernel file's static_asserts agree -------------------------------------------
BAD = [
    ({"wn": 64}, r"a warp tile is 32 thread tiles: \(wm/tm\) x \(wn/tn\) = 8 x 8, not 32"),
    ({"bm": 64, "wm": 128, "tm": 16}, r"the warp tile wm x wn = 128x32 must divide the block tile bm x bn = 64x128"),
    ({"wm": 128, "wn": 64, "tm": 16, "tn": 16}, r"a 16x16 thread tile needs 256 accumulator registers"),
    ({"bn": 64, "wm": 32, "tm": 4}, r"B copies whole passes: a 8x64 tile is 128 float4 copies"),
    ({"bm": 256, "bn": 256, "wm": 32, "tm": 4}, r"\(bm/wm\) x \(bn/wn\) = 64 warps is 2048 threads per block \(at most 1024\)"),
    ({"bn": 256, "bk": 32, "wn": 64, "tn": 16, "stages": 5}, r"5 stages of 32 x \(128 \+ 4 \+ 256\) floats = 242 KiB"),
]


@pytest.mark.parametrize("axes,why", BAD, ids=[str(a) for a, _ in BAD])
def test_an_invalid_tile_is_refused_with_its_constraint(axes, why):
    with pytest.raises(ConfigError, match=r"sgemm tuned\[.*\]: " + why):
        resolve("sgemm", "tuned", shape="512x512x512", axes=axes)
    with pytest.raises(ConfigError, match=why):  # a sweep's grid too, before anything is built
        plan("sgemm", ["tuned"], shapes=["512x512x512"], axes={k: [v] for k, v in axes.items()})


def test_other_variants_take_no_tile_axes():
    with pytest.raises(ConfigError, match="only variant 'tuned' takes them \\(not 'warptile_async'\\)"):
        resolve("sgemm", "warptile_async", axes={"stages": 4})
    with pytest.raises(ConfigError, match="not offered; values are 0, 2, 3, 4, 5"):
        resolve("sgemm", "tuned", axes={"stages": 6})


def _extract() -> str:
    """The kernel part of sgemm.cu: store4 and everything from AsyncShape to the launchers."""
    store4 = re.search(r"template <bool VEC>\n__device__ __forceinline__ void store4.*?\n}\n", SRC, re.S).group(0)
    return store4 + "\n" + SRC[SRC.index("// The shape's facts"):SRC.index("// ---- launchers")]


def _gxx() -> str:
    gxx = shutil.which("g++")
    if not gxx:
        pytest.skip("needs g++ (C++20)")
    return gxx


@pytest.fixture(scope="module")
def kernel_inc(tmp_path_factory):
    p = tmp_path_factory.mktemp("emu") / "sgemm_async.inc"
    p.write_text(_extract())
    return p


def _instantiate(t: dict) -> str:
    args = ", ".join(str(t[k]) for k in KEYS)
    return "\n".join(f"template void sgemm_async_kernel<{args}, {v}>(const float*, const float*, float*, int, int, int);"
                     for v in ("true", "false"))


def test_the_static_asserts_refuse_what_axis_rule_refuses(kernel_inc, tmp_path):
    """Each refused tile of BAD, and a sample of the 4,656 valid ones: g++ (the kernel under the
    emulator's CUDA) compiles exactly the tiles axis_rule accepts."""
    gxx = _gxx()
    valid = [t for t in (dict(zip(KEYS, c)) for c in itertools.product(*[[x for x in OP.axes[k][1] if x] for k in KEYS]))
             if not sg.axis_rule(TUNED, t)]
    cases = [([sg.tile(a)], False) for a, _ in BAD] + [(valid[::400], True)]  # the valid ones in one file
    for k, (ts, ok) in enumerate(cases):
        cpp = tmp_path / f"t{k}.cpp"
        cpp.write_text((TESTS / "sgemm_emulator.cpp").read_text().split("#include EMU_KERNEL")[0]
                       + f'#include "{kernel_inc}"\n' + "\n".join(map(_instantiate, ts)) + "\n")
        r = subprocess.run([gxx, "-std=c++20", "-fsyntax-only", str(cpp)], capture_output=True, text=True)
        why = [sg.axis_rule(TUNED, t) for t in ts]
        assert (r.returncode == 0) == ok, f"{ts}: axis_rule says {why}; g++: {r.stderr[-600:]}"
        if not ok:
            assert "static assertion failed" in r.stderr


# ---- the sweep ------------------------------------------------------------------------------------
def test_tune_sgemm_sweeps_the_shipped_tile_and_21_others_at_the_issue_shapes():
    s = get_sweep("tune-sgemm")
    assert s.shapes == SGEMM_SHAPES == ((4096, 4096, 4096), (2048, 2048, 1024), (2500, 6000, 1792))
    assert SGEMM_TILES[0] == {} and len(SGEMM_TILES) <= 24
    tiles = [sg.tile(t) for t in SGEMM_TILES[1:]]
    assert tiles[0] == sg.DEFAULT_TILE and len({tuple(t.values()) for t in tiles}) == len(tiles)  # no tile twice
    cfgs = s.configs()
    assert len(cfgs) == 3 * (1 + len(SGEMM_TILES)) and sum(c.variant.is_torch for c in cfgs) == 3
    assert {c.variant_s for c in cfgs} >= {"torch", "tuned", "tuned[stages=3]", "tuned[bn=256,tn=16,wn=64]"}


@pytest.fixture(scope="module")
def sweep_cubin():
    """One cubin (sm_90) holding every tile of the sweep, through labkit's own export table."""
    from labkit import sass
    from labkit.build import generated

    exports = sorted({OP.export(TUNED, _axes(t)) for t in SGEMM_TILES[1:]})
    return sass.functions(sass.cubin(generated("sgemm.cu", exports, tag="-tiles"), "90", deps=[KERNELS_DIR / "sgemm.cu"]))


@pytest.mark.parametrize("t", SGEMM_TILES[1:], ids=lambda t: ",".join(f"{k}={v}" for k, v in t.items()))
def test_every_sweep_tile_compiles_without_spills_at_its_occupancy(sweep_cubin, t):
    from labkit import sass

    tile = sg.tile(t)
    tm, tn, n = tile["tm"], tile["tn"], sg.threads(tile)
    smem = sg.smem_bytes(tile)
    want = max(1, 65536 // (n * (tm * tn + 2 * (tm + tn) + 32)))  # AsyncShape::MIN_BLOCKS (launch bounds)
    for vec in ("true", "false"):
        f = sass.find_kernel(sweep_cubin, sg.TILE_KERNEL.format(**tile).replace("true>", f"{vec}>"))
        assert f["local"] == 0 and f["stack"] == 0, f"{tile} {vec}: {f['local']} B of local memory (spills)"
        occ = sass.occupancy(f["registers"], smem, n, "90")
        assert occ["by"]["registers"] >= want and occ["blocks_per_sm"] >= 1, f"{tile} {vec}: {occ}"


# ---- the kernel on the CPU ----------------------------------------------------------------------------
EMU_TILES = [{}, {"bn": 256, "wn": 64, "tn": 16, "bk": 16, "stages": 2}, {"wn": 64, "tn": 16, "stages": 4},
             {"bm": 256, "wn": 64, "tn": 16, "group": 1}, {"bm": 64, "wm": 32, "wn": 64, "stages": 2, "group": 4}]
# float4 path with partial tiles in M, N and K; scalar path (N % 4 != 0); a K cut short in the first
# tile of many; several groups of block rows (600 / 64 = 10 rows of tiles)
EMU_SHAPES = ["1 4 4", "131 260 68", "1 1 1", "7 13 5", "129 65 33", "33 36 1023", "600 200 9"]


@pytest.fixture(scope="module")
def emulator(kernel_inc, tmp_path_factory):
    gxx = _gxx()
    out = tmp_path_factory.mktemp("emu-bin")

    def build(t: dict) -> Path:
        exe = out / ("k_" + "_".join(str(x) for x in t.values()))
        if not exe.exists():
            cmd = [gxx, "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=address", f'-DEMU_KERNEL="{kernel_inc}"',
                   f"-DEMU_TILE={','.join(str(t[k]) for k in KEYS[:-1])}", f"-DEMU_GROUP={t['group']}",
                   "-o", str(exe), str(TESTS / "sgemm_emulator.cpp")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode and "barrier" in r.stderr:
                pytest.skip(f"g++ without C++20 <barrier>: {r.stderr[-300:]}")
            assert r.returncode == 0, r.stderr[-3000:]
        return exe
    return build


@pytest.mark.parametrize("defer", [False, True], ids=["copies-land-at-issue", "copies-land-at-wait"])
@pytest.mark.parametrize("t", EMU_TILES, ids=lambda t: ",".join(f"{k}={v}" for k, v in t.items()) or "default")
def test_the_kernel_is_exact_and_race_free_on_the_emulator(emulator, t, defer):
    tile = sg.tile(t)
    assert not sg.axis_rule(TUNED, tile)
    env = {"EMU_DEFER": "1"} if defer else {}
    r = subprocess.run([str(emulator(tile)), *" ".join(EMU_SHAPES).split()], capture_output=True, text=True,
                       env={**env, "ASAN_OPTIONS": "detect_leaks=0"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == len(EMU_SHAPES) and all("0 wrong, 0 races, 0 copies never waited for" in x for x in lines)
    assert sum(" vec:" in x for x in lines) == 4  # N % 4 == 0: the float4 kernel, else the scalar one


# ---- the acceptance benchmark and the shipped defaults ---------------------------------------------
def _rows(ratios: dict, status="ok") -> list:
    """A sweep's rows: torch and `ratios` {variant label: (time / cuBLAS at each SGEMM_SHAPES shape)}."""
    out = []
    for k, s in enumerate("x".join(map(str, s)) for s in SGEMM_SHAPES):
        out.append({"op": "sgemm", "variant": "torch", "shape": s, "mode": "cold", "status": "ok", "time_us": 100.0,
                    "tflops": 50.0, "pct_fma": 77.0, "gpu": "G", "date": "2026-12-01"})
        for label, rs in ratios.items():
            ok = status if label == "tuned[bk=16]" and k == 1 else "ok"
            out.append({"op": "sgemm", "variant": label, "shape": s, "mode": "cold", "status": ok, "time_us": 100 * rs[k],
                        "vs_torch": rs[k], "tflops": 50 / rs[k], "pct_fma": 77 / rs[k], "gpu": "G", "date": "2026-12-01"})
    return out


def test_the_best_tile_is_the_lowest_worst_case_ratio_of_tiles_ok_at_every_shape():
    from labkit.benchmarks.sgemm_vs_cublas import best_tile, render, table

    rows = _rows({"tuned": (0.5, 0.5, 0.5), "tuned[stages=3]": (1.10, 1.05, 1.12), "tuned[bk=16]": (0.9, 0.9, 0.9),
                  "tuned[bn=256,tn=16,wn=64]": (1.02, 1.04, 1.03), "warptile": (1.14, 1.12, 1.11)}, status="failed")
    t, worst, ratios = best_tile(rows)
    assert t == sg.tile({"bn": 256, "tn": 16, "wn": 64}) and worst == 1.04 and len(ratios) == 3
    tab = table(rows)
    assert [x["variant"] for x in tab[:2]] == ["torch", "tuned"] and tab[0]["shape"] == "4096x4096x4096"
    best = [x for x in tab if x["variant"] == "tuned[bn=256,tn=16,wn=64]"]
    assert [x["goal"] for x in best] == [True, True, True] and best[1]["pct_cublas"] == pytest.approx(100 / 1.04)
    assert [x["goal"] for x in tab if x["variant"] == "tuned[stages=3]"] == [False, True, False]
    assert all(x["goal"] is None for x in tab if x["variant"] in ("torch", "warptile"))
    text = render(tab)
    assert "MISSED (< 95 %)" in text and "failed" in text and "torch (cuBLAS FP32)" in text


def test_the_best_tile_and_the_table_are_of_one_cache_state():
    """A file of several states (the zoo's sgemm sweep, a tune-sgemm re-run in more states): tiles are
    compared in MODE only; a hot row that favours another tile moves neither the best tile nor the table."""
    from labkit.benchmarks.sgemm_vs_cublas import MODE, best_tile, table

    cold = _rows({"tuned[stages=3]": (1.02, 1.03, 1.02), "tuned[bk=16]": (1.05, 1.05, 1.05)})
    hot = [dict(r, mode="hot", vs_torch=0.5) if r["variant"] == "tuned[bk=16]" else dict(r, mode="hot")
           for r in _rows({"tuned[stages=3]": (1.2, 1.2, 1.2), "tuned[bk=16]": (0.5, 0.5, 0.5)})]
    assert MODE == "cold"
    with pytest.raises(ValueError, match="no tuned tile passed"):  # hot rows alone: no tile in MODE
        best_tile(hot)
    t, worst, _ = best_tile(cold + hot)
    assert t == sg.tile({"stages": 3}) and worst == 1.03
    assert table(cold + hot) == table(cold)


def test_gpu_defaults_are_the_best_tiles_of_the_recorded_sweeps():
    """Each GPU with a recorded tune-sgemm.jsonl ships the best tile of that file as tuned's default."""
    from labkit.benchmarks.sgemm_vs_cublas import best_tile
    from labkit.paths import results_dir
    from labkit.records import load_rows

    files = sorted(results_dir().glob("*/tune-sgemm.jsonl"))
    if not files:
        pytest.skip("no tune-sgemm sweep recorded yet")
    for f in files:
        rows = load_rows(f)
        gpu = next(r["gpu"] for r in rows if r.get("gpu"))
        assert any(fam in gpu for fam in sg.GPU_DEFAULTS), f"{f}: {gpu} is no family of GPU_DEFAULTS"
        assert sg.tile_of(gpu) == best_tile(rows)[0], f"{f}: ship its best tile (python -m " \
            f"labkit.benchmarks.sgemm_vs_cublas --best {f.parent})"
