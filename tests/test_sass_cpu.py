"""labkit.sass on CPU: the instruction parser, counts, occupancy, the launchers' block-size table,
and the machine-code diff (nvcc + cuobjdump, no GPU)."""
import pytest

from labkit import sass, sass_diff
from labkit.build import family_text
from labkit.errors import ConfigError, ToolMissingError
from labkit.registry import get_op, ops
from labkit.sass_diff import align


def _tools():
    try:
        for t in ("nvcc", "cuobjdump"):
            sass.tool(t)
        return True
    except ToolMissingError:
        return False


needs_tools = pytest.mark.skipif(not _tools(), reason="needs nvcc and cuobjdump (pip install 'labkit[cuda]')")

LINES = [
    "        /*0190*/                   LDG.E.128.CONSTANT R8, desc[UR6][R8.64] ;   /* 0x0000000608087981 */",
    "                                                                                /* 0x000ea8000c1e9900 */",
    "        /*01a0*/               @!P0 LDG.E.U16.CONSTANT R5, desc[UR6][R4.64] ;",
    "        /*01b0*/                   HADD2 R17, R12, R17 ;",
    "        /*01c0*/                   STG.E.64 desc[UR6][R6.64], R16 ;",
    "        /*01d0*/                   LDS.128 R4, [R2+0x10] ;",
    "        /*01e0*/                   STS [R3], R4 ;",
    "        /*01f0*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR6][R4.64] ;",
    "        /*0200*/                   EXIT ;",
    "        /*0210*/                   NOP;",
]


def test_instructions_parser():
    ins = sass.instructions(LINES)
    assert [i["base"] for i in ins] == ["LDG", "LDG", "HADD2", "STG", "LDS", "STS", "LDGSTS", "EXIT", "NOP"]
    assert [i["bits"] for i in ins] == [128, 16, None, 64, 128, 32, 128, None, None]
    assert ins[1]["pred"] == "@!P0" and ins[1]["text"] == "@!P0 LDG.E.U16.CONSTANT R5, desc[UR6][R4.64]"
    assert ins[0]["addr"] == 0x190 and ins[0]["mem"] and not ins[2]["mem"]
    c = sass.counts({"sass": LINES, "registers": 20, "shared": 0, "local": 0, "stack": 0})
    assert c["instructions"] == 8  # NOP padding left out
    assert c["LDG"] == {16: 1, 128: 1} and c["STG"] == {64: 1} and c["LDS"] == {128: 1} and c["STS"] == {32: 1}
    assert c["LDGSTS"] == {128: 1}
    assert sass.width_summary({32: 8, 16: 2}) == "8 x 32-bit, 2 x 16-bit" and sass.width_summary({}) == "none"


def test_find_kernel_reads_both_demanglers():
    # the CUDA toolkit's cu++filt writes casts; binutils' c++filt (and Variant.kernel) plain values
    funcs = {"void add_kernel<__half, (int)8, (int)4>(const T1 *, const T1 *, T1 *, lk_split)": {"n": 1},
             "void add_kernel<__half, (int)8, (int)16>(const T1 *, const T1 *, T1 *, lk_split)": {"n": 2},
             "void sgemm_dbuf_kernel<(bool)1>(const float *, const float *, float *, int, int, int)": {"n": 3},
             "void histogram_kernel<4, 16>(const int *, int *, long, int)": {"n": 4}}
    assert sass.find_kernel(funcs, "add_kernel<__half, 8, 16>") == {"n": 2}
    assert sass.find_kernel(funcs, "sgemm_dbuf_kernel<true>") == {"n": 3}
    assert sass.find_kernel(funcs, "histogram_kernel<4, 16>") == {"n": 4}
    assert sass.canonical("k<(unsigned int)4u, (long)-3, (bool)0>") == "k<4, -3, false>"
    with pytest.raises(KeyError, match="not found"):
        sass.find_kernel(funcs, "add_kernel<__half, 8, 8>")


# ---- occupancy ------------------------------------------------------------------------------------
def test_occupancy_threads_limited():
    o = sass.occupancy(22, 0, 256, "90")
    assert o["blocks_per_sm"] == 8 and o["limiter"] == "threads" and o["occupancy_pct"] == 100
    assert o["by"] == {"threads": 8, "blocks": 32, "registers": 10, "shared memory": 228}


def test_occupancy_registers_limited():
    # 127 registers -> 4096 per warp (256-register units) -> 4 warps per sub-partition -> 16 warps
    o = sass.occupancy(127, 17664, 256, "90")
    assert o["blocks_per_sm"] == 2 and o["limiter"] == "registers" and o["warps_per_sm"] == 16
    assert o["occupancy_pct"] == 25


def test_occupancy_shared_and_block_limits():
    o = sass.occupancy(32, 100 << 10, 128, "90")  # 100 KiB + 1 KiB reserved per block in 228 KiB
    assert o["blocks_per_sm"] == 2 and o["limiter"] == "shared memory"
    assert sass.occupancy(16, 0, 32, "90")["limiter"] == "blocks"  # 32 blocks of one warp
    assert sass.occupancy(255, 0, 1024, "90")["blocks_per_sm"] == 0  # 255 x 1024 registers never fit
    assert sass.occupancy(32, 0, 1024, "86")["blocks_per_sm"] == 1  # 1536 threads per SM
    with pytest.raises(ValueError, match="sm_75"):
        sass.occupancy(32, 0, 256, "75")
    with pytest.raises(ValueError, match="1, 1024"):
        sass.occupancy(32, 0, 2048, "90")


# ---- block sizes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", list(ops().values()), ids=list(ops()))
def test_every_op_states_its_block_and_the_launcher_still_sets_it(op):
    """Op.block's evidence is text of the kernel file that sets the block size (so the fact cannot
    drift from the launcher silently), and every variant of the op gets a block size or a reason."""
    text = family_text(op.block.file or op.source)
    assert op.block.evidence, f"{op.name}: Op.block names no text of kernels/{op.block.file or op.source}"
    for s in op.block.evidence:
        assert s in text, f"{op.name}: Op.block's {s!r} is no longer in kernels/{op.block.file or op.source}: update it"
    for v in op.variants:
        threads, why = sass.block_threads(op, v, op.testing.shapes[-1])
        assert (isinstance(threads, int) and 1 <= threads <= 1024) or (threads is None and why), (op.name, v.name)


def test_block_threads():
    add, emb, sm = get_op("add"), get_op("embedding"), get_op("softmax_rows")
    v = add.variant("f16x8_pack")
    assert sass.block_threads(add, v, (4096, 4096)) == (256, "tuning axis block=256 (default)")
    assert sass.block_threads(add, v, (4096, 4096), (("block", 512),))[0] == 512
    assert sass.block_threads(emb, emb.variant("f16x8_pack"), (50000, 4096, 1024))[0] == 128  # 128 packs
    assert sass.block_threads(emb, emb.variant("f16x8_pack"), (50000, 4096, 4096))[0] == 256
    assert sass.block_threads(emb, emb.variant("f16"), (50000, 4096, 40))[0] == 64  # 40 elements -> 2 warps
    sg = get_op("sgemm")
    assert sass.block_threads(sg, sg.variant("tiled32"), (64, 64, 64))[0] == 1024
    t, why = sass.block_threads(sm, sm.variant("f16x8"), (4096, 4096))
    assert t is None and "row plan" in why


# ---- the diff -------------------------------------------------------------------------------------
def _ins(*ops):
    return [{"addr": 16 * k, "pred": "", "opcode": o, "base": o.split(".")[0], "args": "", "text": o,
             "mem": o.split(".")[0] in sass.MEMORY, "bits": None} for k, o in enumerate(ops)]


def test_align_anchors_memory_instructions():
    a = _ins("S2R", "IMAD", "LDG.E", "LDG.E", "LDG.E", "LDG.E", "HADD2", "STG.E", "STG.E", "EXIT")
    b = _ins("S2R", "LEA", "IADD3", "LDG.E.128", "HADD2", "HADD2", "STG.E.128", "EXIT")
    rows = align(a, b)
    assert [r["a"]["opcode"] for r in rows if r["a"]] == [i["opcode"] for i in a]  # nothing lost, order kept
    assert [r["b"]["opcode"] for r in rows if r["b"]] == [i["opcode"] for i in b]
    pairs = [(r["a"]["base"], r["b"]["base"]) for r in rows if r["a"] and r["b"] and (r["a"]["mem"] or r["b"]["mem"])]
    assert ("LDG", "LDG") in pairs and ("STG", "STG") in pairs
    assert all(x == y for x, y in pairs)  # a memory instruction is paired only with one of its kind
    assert {r["mark"] for r in rows} >= {" ", "|", "<"}


@needs_tools
def test_diff_add_f16x8_vs_pack():
    d = sass_diff.diff("add", "f16x8", "f16x8_pack", arch="90")
    a, b = d["a"], d["b"]
    # the vector path: 4 x 32-bit per input vs 1 x 128-bit; the scalar edge path: 16-bit in both
    assert a["LDG"] == {16: 2, 32: 8} and b["LDG"] == {16: 2, 128: 2}
    assert a["STG"] == {16: 1, 32: 4} and b["STG"] == {16: 1, 128: 1}
    assert a["registers"] and b["registers"] and a["instructions"] > b["instructions"]
    assert "LDG: f16x8 10 (8 x 32-bit, 2 x 16-bit), f16x8_pack 4 (2 x 128-bit, 2 x 16-bit)" in d["summary"]
    wide = [r for r in d["rows"] if r["b"] and r["b"]["bits"] == 128 and r["b"]["base"] == "LDG"]
    assert len(wide) == 2 and all(r["a"] and r["a"]["base"] == "LDG" and r["a"]["bits"] == 32 for r in wide)
    assert sum(1 for r in d["rows"] if r["a"] and r["a"]["base"] == "LDG" and r["b"] is None) == 6


@needs_tools
def test_diff_text_and_html():
    t = sass_diff.diff_text("add", "f16x8", "f16x8_pack", arch="90")
    assert t.splitlines()[0].startswith("add: f16x8 vs f16x8_pack, sm_90")
    assert "8 x 32-bit, 2 x 16-bit" in t and "2 x 128-bit, 2 x 16-bit" in t
    assert any("LDG.E.CONSTANT" in line and "|" in line and "LDG.E.128.CONSTANT" in line for line in t.splitlines())
    h = sass_diff.diff_html("add", "f16x8", "f16x8_pack", arch="90")
    assert h.count("<table") == 2 and "<b>LDG.E.128.CONSTANT" in h and "background:#fdecea" in h


@needs_tools
def test_diff_errors():
    with pytest.raises(ConfigError, match="torch's own kernel"):
        sass_diff.diff("add", "torch", "f16x8_pack")
    with pytest.raises(ConfigError, match="no variant 'f16x9'"):
        sass_diff.diff("add", "f16x9", "f16x8_pack")
