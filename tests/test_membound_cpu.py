"""CPU half of issue 25's memory-bound variants (reduce_sum / dot one-pass, histogram i32x4_sm,
embedding flat gather, softmax_rows_smem's single exp) and labkit.benchmarks.membound: the variant
lines and outputs, the machine code doing what the notes claim (loads issued before the math
that waits for them, no per-count window lookups, cp.async copies, one exp per element), mirrors of
the kernels' index arithmetic, the rounding budget of the stored exponentials, and the benchmark's
plan, summary and ncu lines. No GPU."""
import math
import random

import pytest
import torch

from labkit import sass
from labkit.check import compare
from labkit.errors import ToolMissingError
from labkit.registry import get_op


def _tools():
    try:
        return all(sass.tool(t) for t in ("nvcc", "cuobjdump"))
    except ToolMissingError:
        return False


needs_tools = pytest.mark.skipif(not _tools(), reason="needs nvcc and cuobjdump (pip install 'labkit[cuda]')")

NEW = [("reduce_sum", "f32x4_1pass"), ("reduce_sum", "f16x8_1pass"), ("reduce_sum", "bf16x8_1pass"),
       ("dot", "f32x4_1pass"), ("histogram", "i32x4_sm"), ("embedding", "f32x4_flat"), ("embedding", "f16x8_flat")]


# ---- variant lines and outputs --------------------------------------------------------------------
@pytest.mark.parametrize("op_name,variant", NEW)
def test_new_variants_are_steps_after_the_old_ones(op_name, variant):
    op = get_op(op_name)
    v = op.variant(variant)
    assert v.access == 16 and v.note and v.symbol == f"{op_name}_{variant}"
    names = [x.name for x in op.variants]
    assert names.index(variant) >= len(names) - 3  # appended: the old variants stay, in their order


@pytest.mark.parametrize("op_name", ["reduce_sum", "dot"])
def test_one_pass_needs_no_workspace(op_name):
    # the partial sums and the ticket live in the module's device memory (kernels/lk_grid.cuh): the
    # outputs labkit.call allocates on a repeat are not zeroed, and the op's outputs stay y alone
    op = get_op(op_name)
    gen = torch.Generator().manual_seed(0)
    inputs = op.data.make_inputs((1000,), op.dtypes[0], gen, 3)
    (y,) = op.data.make_outputs(inputs, (1000,), op.dtypes[0], 3)
    assert y.numel() == 1 and y.storage_offset() == 3 and op.call.outputs == 1


def test_tuning_axes_build_their_own_launchers():
    assert get_op("reduce_sum").export(get_op("reduce_sum").variant("f16x8_1pass"), (("unroll", 8),)) == \
        ("reduce_sum_f16x8_1pass__unroll8", "launch_reduce_1pass<__half, 8, 8>")
    h = get_op("histogram")
    assert h.export(h.variant("i32x4_sm"), (("smem_kb", 192), ("unroll", 4))) == \
        ("histogram_i32x4_sm__smem_kb192__unroll4", "launch_histogram_sm<4, 192>")
    assert get_op("dot").variant("f32x4_1pass").kernel == "dot_1pass<4, 2>"


# ---- the machine code -----------------------------------------------------------------------------
def _ins(source, kernel):
    f = sass.find_kernel(sass.functions(sass.family_cubin(source, "90")), kernel)
    return f, sass.instructions(f["sass"])


# instructions that take loaded values (f16 -> f32, the bf16 shift, adds, the last round's mask);
# the loads' address arithmetic (IMAD.WIDE, LEA, IADD3) may sit between them
DATA_OPS = {"FADD", "HADD2.F32", "FFMA", "FSEL", "IMAD.U32", "LOP3.LUT", "PRMT"}


def _loads_before(ins, width=128):
    """Runs of `width`-bit global loads issued before the next instruction that uses loaded values."""
    runs, n = [], 0
    for i in ins:
        if i["base"] == "LDG" and i["bits"] == width:
            n += 1
        elif i["opcode"] in DATA_OPS and n:
            runs.append(n)
            n = 0
    return runs


@needs_tools
@pytest.mark.parametrize("kernel,per_round", [("reduce_sum_1pass<__half, 8, 4>", 4),
                                              ("reduce_sum_1pass<__nv_bfloat16, 8, 4>", 4),
                                              ("reduce_sum_1pass<float, 4, 4>", 4)])
def test_one_pass_rounds_issue_every_load_before_the_first_add(kernel, per_round):
    f, ins = _ins("reduce.cu", kernel)
    # the whole rounds and the clamped last round: 4 loads, then the adds (the pack kernel's
    # guarded last round put an add between its loads)
    assert _loads_before(ins)[:2] == [per_round, per_round]
    assert f["registers"] <= 32 and f["local"] == 0  # 8 blocks of 256 threads per SM
    assert sum(i["base"] == "ATOMG" for i in ins) == 1  # the ticket; no float atomics, no per-launch memset
    assert not any(i["opcode"].startswith("RED") for i in ins)


@needs_tools
def test_dot_one_pass_loads_a_and_b_before_the_first_fma():
    f, ins = _ins("dot.cu", "dot_1pass<4, 2>")
    assert _loads_before(ins)[:2] == [4, 4] and f["registers"] <= 32


@needs_tools
def test_histogram_counts_without_window_lookups():
    _, old = _ins("histogram.cu", "histogram_smem_kernel<4, 16, 1024>")
    f, new = _ins("histogram.cu", "histogram_sm_kernel<4>")
    count = lambda ins, op: sum(i["base"] == op for i in ins)  # noqa: E731
    # the pack kernel: a branch and an S2UR (the shared window's base) around every count
    assert count(old, "S2UR") >= count(old, "ATOMS") - 2
    # i32x4_sm: 4 int4 per round = 16 counts, twice (whole rounds, the last round) + the scalar edge
    atoms = [i for i in new if i["base"] == "ATOMS"]
    assert len(atoms) == 2 * 16 + 1 and all(not i["pred"] for i in atoms) and count(new, "S2UR") <= 4
    assert sum(i["base"] == "LDG" and i["bits"] == 128 for i in new) == 2 * 4
    assert count(new, "ACQBULK") == 1  # griddepcontrol.wait: only the flush waits for the zeroing kernel
    assert f["registers"] <= 64 and f["local"] == 0  # 1024 threads: one block per SM


@needs_tools
@pytest.mark.parametrize("kernel", ["embedding_flat_kernel<float, 4, 8>", "embedding_flat_kernel<__half, 8, 8>"])
def test_flat_gather_copies_through_shared_memory(kernel):
    f, ins = _ins("embedding.cu", kernel)
    copies = [i for i in ins if i["base"] == "LDGSTS"]
    assert sum(i["bits"] == 128 for i in copies) == 8  # one round's packs; then the next round's indices
    assert sum(i["bits"] == 32 for i in copies) == 16  # (first round, every round)
    assert sum(i["base"] == "LDG" for i in ins) == 0  # no pack held in registers waiting for its store
    assert sum(i["base"] == "DEPBAR" for i in ins) == 2 and f["local"] == 0


@needs_tools
@pytest.mark.parametrize("kernel,ex2", [("softmax_rows_smem<__nv_bfloat16, 8>", 8), ("softmax_rows_smem<float, 4>", 4),
                                        ("softmax_rows_smem<__half, 8>", 16)])
def test_softmax_rows_smem_exps_per_pack(kernel, ex2):
    _, ins = _ins("softmax.cu", kernel)
    assert sum(i["opcode"] == "MUFU.EX2" for i in ins) == ex2  # one per element; f16 two


# ---- the kernels' index arithmetic, mirrored ----------------------------------------------------
def _flat_plan(total, P, stride, U=8):
    rounds = -(-total // (stride * U))
    per_round = -(-total // (stride * rounds))
    return per_round, divmod(stride, P), divmod(stride * per_round, P)


def _flat_packs(rows, P, blocks, U=8, threads=256):
    """(row, column) of every pack each thread of embedding_flat_kernel copies, with its output pack."""
    total, stride = rows * P, blocks * threads
    per_round, (sr, sc), (rr_, rc) = _flat_plan(total, P, stride, U)
    seen = []
    for t in range(stride):
        r0, c0, i = t // P, t % P, t
        while i < total:
            r, c = r0, c0
            for u in range(U):
                if u < per_round and i + u * stride < total:
                    seen.append((i + u * stride, r, c))
                r, c = r + sr, c + sc
                if c >= P:
                    r, c = r + 1, c - P
            i += per_round * stride
            r0, c0 = r0 + rr_, c0 + rc
            if c0 >= P:
                r0, c0 = r0 + 1, c0 - P
    return total, seen


@pytest.mark.parametrize("rows,P,blocks", [(1, 1, 1), (7, 3, 1), (9, 250, 2), (33, 7, 3), (100, 64, 5), (3, 1000, 4)])
def test_flat_gather_copies_every_pack_once(rows, P, blocks):
    total, seen = _flat_packs(rows, P, blocks)
    assert sorted(i for i, _, _ in seen) == list(range(total))
    assert all((r, c) == divmod(i, P) for i, r, c in seen)  # the walk without a division agrees


def test_flat_rounds_are_even():
    # 30000 x 9000 x 1000 f32 on 132 SMs x 5 blocks: 2.25 M packs, ~13.3 a thread: 2 rounds of <= 7,
    # not 8 + 5.3
    per_round, _, _ = _flat_plan(9000 * 250, 250, 132 * 5 * 256)
    assert per_round == 7


def test_histogram_flush_visits_every_bin_once_per_block():
    for bins in (1, 31, 4096, 16384, 20000):
        for grid in (1, 7, 132):
            for b in {0, grid // 2, grid - 1}:
                start = (b * bins // grid) & ~31
                got = [(k + start) if k + start < bins else k + start - bins for k in range(bins)]
                assert sorted(got) == list(range(bins))


def test_histogram_copies_fit_the_budget():
    def log_copies(bins, smem_kb):  # launch_histogram_sm
        lc, one = 0, 4 * bins
        while (1 << lc) < 32 and (2 << lc) * one <= smem_kb << 10:
            lc += 1
        return lc
    assert [1 << log_copies(b, 96) for b in (16, 256, 4096, 16384, 20000)] == [32, 32, 4, 1, 1]
    assert (1 << log_copies(4096, 128)) * 4096 * 4 == 128 << 10


def test_grid_rounds_cover_every_pack_once():
    # reduce_sum_1pass / dot_1pass: whole rounds of U packs stride apart, then one clamped round
    rng = random.Random(0)
    for _ in range(200):
        packs, stride, U = rng.randint(0, 5000), rng.randint(1, 700), rng.choice((1, 2, 4, 8))
        seen = []
        for t in range(stride):
            p = t
            while p + (U - 1) * stride < packs:
                seen += [p + u * stride for u in range(U)]
                p += U * stride
            if p < packs:
                seen += [p + u * stride for u in range(U) if p + u * stride < packs]
        assert sorted(seen) == list(range(packs))


# ---- softmax_rows_smem keeps e = 2^(x log2 e - max log2 e) in its row's storage type -------------
@pytest.mark.parametrize("dtype,fits", [("bf16", True), ("f32", True)])
def test_stored_exponentials_stay_within_tolerance(dtype, fits):
    op = get_op("softmax_rows")
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(4, 50000, generator=gen) * 3).to({"bf16": torch.bfloat16, "f32": torch.float32}[dtype])
    xf = x.float()
    e = torch.exp2(xf * math.log2(math.e) - xf.amax(-1, keepdim=True) * math.log2(math.e))
    inv = 1 / e.sum(-1, keepdim=True)
    y = (e.to(x.dtype).float() * inv).to(x.dtype)  # e rounded once, then e * 1/sum rounded
    res = compare(y, x.double().softmax(-1), *op.tol((4, 50000), dtype), "y")
    assert res.ok is fits, res.message


# ---- the benchmark --------------------------------------------------------------------------------
def test_membound_cases_move_at_least_64_mib():
    from labkit.benchmarks import membound

    for name, dtype, shape in membound.CASES:
        op = get_op(name)
        assert op.cost.bytes_moved(shape, dtype) >= 64 << 20 and op.parse_shape(op.format_shape(shape)) == shape
        old, new = membound.OLD_NEW[name][dtype]
        assert op.variant(old, dtype) and op.variant(new, dtype)
    for name, variant, dtype, shapes, axes in membound.TUNE:
        get_op(name).check_axes(get_op(name).variant(variant, dtype), {k: v[0] for k, v in axes.items()})


def test_membound_summary_and_table():
    from labkit.benchmarks.membound import case_summary, row_summary, table

    op = get_op("dot")
    base = {"op": "dot", "dtype": "f32", "shape": "16777216", "status": "ok", "peak_gbps": 3000.0, "kernels": 1}
    rows = [row_summary({**base, "variant": "torch", "time_us": 50.0, "pct_peak": 89.5}),
            row_summary({**base, "variant": "f32x4", "time_us": 48.0, "pct_peak": 93.2, "kernel_gbps": 2990.0}),
            row_summary({**base, "variant": "f32x4_1pass", "time_us": 46.5, "pct_peak": 96.2, "kernel_gbps": 3100.0}),
            row_summary({**base, "variant": "f32", "status": "failed", "error": "output 0: 3 of 1 wrong"})]
    facts = {"copy_peak_gbps": 3000.0, "floor": {"cold": {"overhead_us": 2.9}}}
    s = case_summary(op, "f32", (1 << 24,), rows, facts)
    assert s["best"] == "f32x4_1pass" and s["met"] and s["failed"] == ["f32"]
    assert s["goal_time_us"] == pytest.approx((8 * (1 << 24) + 4) / (0.95 * 3000e9) * 1e6)
    assert s["goal_kernel_us"] == pytest.approx(s["goal_time_us"] - 2.9)
    text = table(rows, [s])
    assert "f32x4_1pass" in text and "met" in text and "3 of 1 wrong" in text and "103.3" in text


def test_membound_ncu_lines():
    from labkit.benchmarks.membound import CASES, ncu_lines

    lines = ncu_lines("/tmp/ncu")
    assert sum(line.startswith("labkit profile ") for line in lines) == len(CASES)
    full = [line for line in lines if "--set full" in line]
    assert full and all(line.startswith("LABKIT_BLOCKING=0 ncu --nvtx --nvtx-include") for line in full)
    assert any("regex:histogram_sm_kernel" in line and "/tmp/ncu/histogram-i32-67108864x16384-i32x4_sm" in line
               for line in full)
