"""CPU half: a new op is its kernel file and its op module, nothing else (issue 26). In a temporary
copy of the package, kernels and tests, add `gelu` (kernels/gelu.cu + labkit/ops/gelu.py, two
variants) and run there, against the copy, the checks every op must pass: registration and the
derived launcher/kernel names, labkit.call's signature, the reference against the torch baseline,
fuzz caps, the sweep, zoo and recording tables, the block-size fact and (where nvcc and cuobjdump
are installed) the access widths in the machine code. No file of the copy but the two is touched."""
import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GELU_CU = r"""// GELU y = x * Phi(x), tanh form: a test op, added in a temporary copy by tests/test_new_op_cpu.py.
// One template for both variants (as activation.cu): T = element type, N = elements per thread,
// ACCESS = bytes per memory instruction; any n and alignment (scalar head + packs + scalar tail).
#include "labkit.cuh"

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

template <typename T, int N, int ACCESS>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, lk_split s) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < s.packs) {
    const int64_t i = s.head + t * N;
    Pack<T, N> rx, ry;
    lk_load<ACCESS>(rx, x + i);
#pragma unroll
    for (int k = 0; k < N; ++k) ry.elem[k] = lk_from_float<T>(gelu(lk_to_float(rx.elem[k])));
    lk_store<ACCESS>(y + i, ry);
  }
  if (t < s.head + s.tail) {
    const int64_t i = lk_edge_index(s, N, t);
    y[i] = lk_from_float<T>(gelu(lk_to_float(x[i])));
  }
}

template <typename T, int N, int ACCESS>
static int launch_gelu(const lk_args* args, cudaStream_t stream) {
  const T* x = lk_ptr<const T>(args->t[0]);
  T* y = lk_ptr<T>(args->t[1]);
  const int64_t n = args->t[1].numel;
  const int threads = 256;
  const void* ptrs[2] = {x, y};
  lk_split s = lk_make_split(n, N, sizeof(T), ptrs, 2);
  if (!s.vector) {
    lk_split scalar = lk_make_split(n, 1, sizeof(T), ptrs, 2);
    gelu_kernel<T, 1, sizeof(T)><<<ceil_div<int64_t>(n, threads), threads, 0, stream>>>(x, y, scalar);
    return lk_launch_status(LK_PATH_FALLBACK);
  }
  const int64_t work = s.packs > s.head + s.tail ? s.packs : s.head + s.tail;
  gelu_kernel<T, N, ACCESS><<<ceil_div<int64_t>(work > 0 ? work : 1, threads), threads, 0, stream>>>(x, y, s);
  return lk_launch_status();
}
"""

GELU_PY = '''"""GELU y = x * Phi(x), tanh form: a test op (tests/test_new_op_cpu.py). Kernels: kernels/gelu.cu."""
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from .families import Arg, Signature, one_input, output_like_input, read_write_bytes, read_write_footprint, shape_of


def _reference(inputs, shape, dtype):
    x = inputs[0].double()
    return [0.5 * x * (1 + (0.7978845608028654 * (x + 0.044715 * x ** 3)).tanh())]


def _torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    outputs[0] = F.gelu(inputs[0], approximate="tanh")  # no out=: its result replaces the output


OPS = [Op(
    name="gelu",
    title="GELU (tanh form)",
    source="gelu.cu",
    block=Block(256, evidence="const int threads = 256;"),
    launch="launch_gelu<{ctype}, {width}, {access}>",
    kernel="gelu_kernel<{ctype}, {width}, {access}>",
    variants=[V("f32", "f32", width=1, access=4, note="one float per thread"),
              V("f32x4", "f32", width=4, access=16, note="one float4 (128-bit) access per thread")],
    shape_axes=("S", "K"),
    default_shapes=[(8192, 8192), (16384, 8192)],
    data=Data(make_inputs=one_input, make_outputs=output_like_input, reference=_reference, torch_impl=_torch,
              tolerance=lambda shape, dtype: (1e-5, 1e-6)),  # tanhf: a few ulp
    cost=Cost(bytes_moved=read_write_bytes, footprint=read_write_footprint,
              flops=lambda shape, dtype: 9 * shape[0] * shape[1]),
    call=Call(signature=Signature("gelu", [Arg("x")], shape_of)),
    testing=Testing(shapes=[(1, 1), (1, 7), (1, 1023), (3, 333)], fuzz_caps=(3000, 1 << 17)),
)]
'''

# the generic checks of the test suite, run in the copy on the new op (by node id)
SUITE = [
    "tests/test_registry_cpu.py::test_derived_names_exist_in_the_kernel_file[gelu]",
    "tests/test_registry_cpu.py::test_one_family_one_module_and_no_hand_written_exports[gelu.cu]",
    "tests/test_registry_cpu.py::test_shapes_round_trip[gelu]",
    "tests/test_registry_cpu.py::test_memory_bound_default_shape[gelu]",
    "tests/test_core_cpu.py::test_every_op_and_variant_resolves_once[gelu]",
    "tests/test_core_cpu.py::test_every_op_is_callable_through_the_same_resolution",
    "tests/test_sass_cpu.py::test_every_op_states_its_block_and_the_launcher_still_sets_it[gelu]",
    "tests/test_record_cpu.py::test_the_zoo_stage_runs_every_zoo_sweep_in_one_process",
    "tests/test_layers_cpu.py::test_every_module_has_a_layer",
    "tests/test_layers_cpu.py::test_imports_never_go_up_a_layer",
    "tests/test_layers_cpu.py::test_no_module_over_400_lines[ops/gelu.py]",
    "tests/test_layers_cpu.py::test_every_function_level_import_is_listed_with_its_reason",
    "tests/test_layers_cpu.py::test_each_listed_reason_holds",
]
NEW = {"kernels/gelu.cu": GELU_CU, "labkit/ops/gelu.py": GELU_PY}


def _copy(dst: Path) -> Path:
    """labkit/, kernels/ and the tests' Python files, as they are in this checkout."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "labkit", dst / "labkit", ignore=skip)
    shutil.copytree(ROOT / "kernels", dst / "kernels", ignore=skip)
    (dst / "tests").mkdir()
    for f in (ROOT / "tests").glob("*.py"):
        shutil.copy2(f, dst / "tests" / f.name)
    return dst


def _changed(a: Path, b: Path, rel=Path()) -> list:
    """Files that differ between two trees, or exist in one only (relative paths)."""
    c = filecmp.dircmp(a, b, ignore=["__pycache__"])
    out = [str(rel / n) for n in c.left_only + c.right_only + c.diff_files + c.funny_files]
    return out + [x for d in c.common_dirs for x in _changed(a / d, b / d, rel / d)]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = _copy(tmp_path_factory.mktemp("new-op"))
    for rel, text in NEW.items():
        (root / rel).write_text(text)
    return root


def _run(copy: Path, argv, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(copy), "LABKIT_CACHE": str(copy / ".cache")}
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_copy_differs_from_this_checkout_by_the_two_new_files_only(copy):
    changed = [*_changed(ROOT / "labkit", copy / "labkit", Path("labkit")),
               *_changed(ROOT / "kernels", copy / "kernels", Path("kernels"))]
    assert sorted(changed) == sorted(NEW)


def test_the_suite_s_op_checks_pass_for_the_new_op(copy):
    r = _run(copy, ["-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITE])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert f"{len(SUITE)} passed" in r.stdout, r.stdout[-2000:]


def test_the_new_op_is_in_every_table_and_fact(copy):
    r = _run(copy, ["-c", "import sys; sys.path.insert(0, 'tests'); import test_new_op_cpu as t; t.in_copy()"])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "in_copy: ok" in r.stdout, r.stdout


# ---- what runs inside the copy ------------------------------------------------------------------
def in_copy():
    """The op-level checks, in the copy (PYTHONPATH): each prints one line."""
    import torch

    import labkit
    from labkit import sass
    from labkit.benchmarks import fuzz, record
    from labkit.benchmarks.zoo import goal_table
    from labkit.build import export_source
    from labkit.check import compare
    from labkit.cli import main as cli
    from labkit.errors import ConfigError, ToolMissingError
    from labkit.records import ResultLog
    from labkit.registry import family_exports, get_op
    from labkit.sweeps import SWEEPS
    from labkit.tables import seed_table

    here = Path.cwd().resolve()
    assert Path(labkit.__file__).resolve().is_relative_to(here), f"labkit from {labkit.__file__}, not the copy"
    op = get_op("gelu")
    # registration: the variants' symbols, launchers and kernels, derived and exported
    assert [(v.symbol, v.launch, v.kernel) for v in op.variants] == [
        ("gelu_f32", "launch_gelu<float, 1, 4>", "gelu_kernel<float, 1, 4>"),
        ("gelu_f32x4", "launch_gelu<float, 4, 16>", "gelu_kernel<float, 4, 16>")]
    assert "LK_EXPORT int gelu_f32x4(" in export_source("gelu.cu", family_exports("gelu.cu"))
    print("registration: ok")
    # labkit.call's signature, then the device check last (CPU tensors)
    x = torch.randn(3, 333)
    assert op.call.signature([x], "f32") == (3, 333)
    for bad, match in [([x.half()], "gelu: x has dtype f16, the variant runs on f32"),
                       ([x, x], r"gelu takes 1 tensor \(x\), got 2"), ([x.t()], "gelu: x is not contiguous")]:
        try:
            labkit.call("gelu", "f32x4", *bad)
            raise AssertionError(f"no error for {match}")
        except ConfigError as e:
            assert __import__("re").search(match, str(e)), str(e)
    try:
        labkit.call("gelu", "f32x4", x)
    except ConfigError as e:
        assert "labkit kernels take CUDA tensors" in str(e) or torch.cuda.is_available(), str(e)
    print("signature: ok")
    # the reference against the torch baseline, on the CPU
    gen = torch.Generator().manual_seed(0)
    for shape in op.testing.shapes:
        inputs = [torch.randn(shape, generator=gen) * 3]  # make_inputs allocates on the GPU
        outputs = op.data.make_outputs(inputs, shape, "f32", 1)
        op.data.torch_impl(inputs, outputs, shape, "f32")
        assert compare(outputs[0], op.data.reference(inputs, shape, "f32")[0], *op.tol(shape, "f32")).ok, shape
    print("reference: ok")
    # fuzz: every case within the op's caps and budget
    cases = fuzz.cases([op], seed=0, per_variant=24)
    assert len(cases) == 48 and all(fuzz.fits(o, s, v.dtype) and all(1 <= a <= c for a, c in zip(s, op.testing.fuzz_caps))
                                    for o, v, s, _ in cases)
    print("fuzz caps: ok")
    # tables: its sweep, the recording's zoo stage, the zoo goal table, seed_table's unit, `labkit list`
    assert SWEEPS["gelu"].op == "gelu" and "gelu" in record.zoo()
    cfgs = SWEEPS["gelu"].configs()
    assert {c.variant.name for c in cfgs} == {"torch", "f32", "f32x4"} and len(cfgs) == 3 * len(op.default_shapes) * len(SWEEPS["gelu"].modes)
    row = {"op": "gelu", "variant": "f32x4", "dtype": "f32", "shape": "8192x8192", "mode": "cold", "status": "ok",
           "time_us": 194.0, "kernel_us": 193.0, "gbps": 2767.0, "pct_peak": 95.9, "vs_torch": 0.9,
           "tflops": 3.0, "pct_fma": 5.0, "bytes": op.cost.bytes_moved((8192, 8192), "f32")}
    assert "GB/s" in seed_table([row]) and "TFLOP/s" not in seed_table([row])  # Op.bound: memory
    folder = here / "zoo-results"
    folder.mkdir(exist_ok=True)
    ResultLog(folder / "gelu.jsonl").append(row)
    # goal: 95 %; no CUPTI, no % of spec in this row
    assert "| gelu | f32 | cold | 1 | f32x4 | 95.9 | – | – | 0.90 | met |" in goal_table(folder)
    assert cli(["list", "gelu"]) == 0
    print("tables: ok")
    # sass facts: the block size, and where the tools exist, the access widths in the machine code
    assert sass.block_threads(op, op.variant("f32x4"), (3, 333)) == (256, "kernels/gelu.cu: `const int threads = 256;`")
    try:
        funcs = sass.functions(sass.family_cubin("gelu.cu", "90"))
    except ToolMissingError as e:
        print(f"sass widths: skipped ({e})")
    else:
        for v in op.variants:
            f = sass.find_kernel(funcs, v.kernel)
            assert 8 * v.access in sass.mem_widths(f["sass"], "LDG"), (v.name, sass.mem_widths(f["sass"], "LDG"))
            assert max(sass.mem_widths(f["sass"], "STG")) == 8 * v.access, v.name
        print("sass widths: ok")
    print("in_copy: ok")
