"""CPU half: every kernel family (with its generated export table) and the harness compile for sm_80
and sm_90, and the machine code has the access widths each variant's line claims (cuobjdump). No GPU."""
import pytest

from labkit import sass
from labkit.paths import KERNELS_DIR
from labkit.registry import get_op, ops

SOURCES = sorted({op.source for op in ops().values()})
ARCHS = ["80", "90"]
VARIANTS = [(op, v) for op in ops().values() for v in op.variants if v.kernel]


@pytest.fixture(scope="module")
def cubins():
    out = {(src, arch): sass.family_cubin(src, arch) for src in SOURCES for arch in ARCHS}
    out.update({("harness.cu", arch): sass.cubin(KERNELS_DIR / "harness.cu", arch) for arch in ARCHS})
    return out


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("src", SOURCES + ["harness.cu"])
def test_compiles(cubins, src, arch):
    assert cubins[(src, arch)].stat().st_size > 0


def test_harness_has_the_blocking_empty_and_fma_kernels(cubins):
    names = " ".join(sass.functions(cubins[("harness.cu", "90")]))
    for k in ("lk_block_kernel", "lk_empty_kernel", "lk_mark_begin_kernel", "lk_mark_end_kernel", "lk_fma_kernel"):
        assert k in names
    fma = sass.find_kernel(sass.functions(cubins[("harness.cu", "90")]), "lk_fma_kernel")["sass"]
    assert sum("FFMA" in line for line in fma) >= 8 * 16  # 8 chains x 16 unrolled iterations


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op,v", VARIANTS, ids=[f"{o.name}-{v.name}" for o, v in VARIANTS])
def test_access_width_in_sass(cubins, op, v, arch):
    f = sass.find_kernel(sass.functions(cubins[(op.source, arch)]), v.kernel)
    # global loads, and copies global -> shared (cp.async: embedding's flat gather)
    loads = sass.mem_widths(f["sass"], "LDG") | set(sass.counts(f).get("LDGSTS", {}))
    # the data loads have the claimed width; 32-bit loads may also appear (indices, sizes)
    assert 8 * v.access in loads and max(loads) <= max(8 * v.access, 32), \
        f"{v.name}: global loads {sorted(loads)} bits, expected {8 * v.access}"
    if op.testing.vector_stores:
        stores = sass.mem_widths(f["sass"], "STG")
        assert max(stores) == 8 * v.access, f"{v.name}: global stores {sorted(stores)} bits"
    if v.access < 8:  # scalar / 32-bit variants must issue neither 64- nor 128-bit accesses
        assert not (loads | sass.mem_widths(f["sass"], "STG")) & {64, 128}
    assert f["registers"] and f["registers"] > 0


def test_f16x8_issues_four_times_the_loads_of_pack(cubins):
    funcs = sass.functions(cubins[("add.cu", "90")])
    split = sass.find_kernel(funcs, "add_kernel<__half, 8, 4>")["sass"]
    pack = sass.find_kernel(funcs, "add_kernel<__half, 8, 16>")["sass"]
    count = lambda lines, w: sum(1 for line in lines if sass.mem_widths([line], "LDG") == {w})  # noqa: E731
    assert count(split, 32) == 8 and count(pack, 128) == 2  # a and b: 4 x 32-bit each vs 1 x 128-bit each


@pytest.mark.parametrize("op_name,variant,axes", [("add", "f16x8_pack", (("block", 1024),)),
                                                   ("softmax_rows", "f16x8", (("floats", 16), ("threads", 512)))])
def test_a_tuning_axis_value_builds_its_own_launcher(op_name, variant, axes, tmp_path):
    from labkit.build import generated

    op = get_op(op_name)
    symbol, launch = op.export(op.variant(variant), axes)
    cubin = sass.cubin(generated(op.source, [(symbol, launch)], tag=f"-{symbol}"), "90", deps=[KERNELS_DIR / op.source])
    names = list(sass.functions(cubin))
    if op_name == "add":  # block size is a launch setting: the same kernel, launched with 1024 threads
        assert sass.find_kernel(sass.functions(cubin), op.variant(variant).kernel)
    else:  # 16 floats of a 16-bit row per thread: the register kernel with 16 / 8 = 2 packs per thread
        assert any("softmax_rows_reg<__half, 8, 2," in n for n in names), names


def test_mem_widths_parser():
    lines = ["LDG.E.128.CONSTANT R8, desc[UR6][R8.64] ;", "LDG.E.U16.CONSTANT R5, [R4.64] ;",
             "STG.E.64 desc[UR6][R6.64], R16 ;", "STG.E desc[UR6][R6.64], R5 ;", "LDG.E.U8 R1, [R2.64] ;"]
    assert sass.mem_widths(lines, "LDG") == {128, 16, 8}
    assert sass.mem_widths(lines, "STG") == {64, 32}


def test_report_lists_registers_per_variant():
    df = sass.report("copy", "90")
    assert list(df["variant"]) == ["w1", "w2", "w4", "w8", "w16"]
    assert list(df["ldg_bits"]) == [8, 16, 32, 64, 128]
    assert (df["registers"] > 0).all()


def test_the_sanitizer_canary_builds_and_keeps_its_planted_race(tmp_path):
    """The kernel racecheck must report (tests/test_sanitizer_canary_gpu.py) compiles as an inline
    variant, with no barrier between its shared-memory write and read."""
    import importlib.util

    from labkit.inline_kernel import render

    spec = importlib.util.spec_from_file_location("canary", KERNELS_DIR.parent / "tests" / "test_sanitizer_canary_gpu.py")
    canary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(canary)
    cu = tmp_path / "canary_race.cu"
    cu.write_text(render(get_op("add"), "canary_race", canary.RACE, "labkit_canary_race", "f32", 1, 256))
    body = "\n".join(sass.find_kernel(sass.functions(sass.cubin(cu, "90")), "labkit_canary_race")["sass"])
    assert "STS" in body and "LDS" in body and "BAR" not in body
