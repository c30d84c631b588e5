"""CPU half: statistics, stop rule, checks, records/resume, registry and CLI errors, build errors."""
import json

import pytest
import torch

import labkit
from labkit import cli
from labkit.build import build_key, parse_compile_error
from labkit.check import compare, poison
from labkit.errors import ConfigError, NoGPUError
from labkit.ranges import check_name, config_name
from labkit.records import ResultLog, load_rows, save
from labkit.registry import get_op, parse_size
from labkit.runner import expand
from labkit.stats import StopRule, summarize


def test_summary_statistics():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 100.0, 5)
    assert s.q1 == 2.0 and s.q3 == 4.0 and s.iqr == 2.0
    assert s.noise == pytest.approx(2.0 / 1.349 / 3.0)  # robust: the 100 outlier does not inflate it


def test_stop_rule_reasons():
    rule = StopRule(noise_target=0.01, min_samples=5, max_samples=50, min_time_s=0.0, budget_s=10)
    steady = [1e-3] * 5
    assert rule.reason(steady[:4], 0.1) is None            # too few samples
    assert rule.reason(steady, 0.1) == "converged"
    noisy = [1e-3, 2e-3] * 5
    assert rule.reason(noisy, 0.1) is None                 # noise 50 % > 1 %
    assert rule.reason(noisy, 10.0) == "budget"
    assert rule.reason(noisy * 5, 0.1) == "max_samples"
    assert StopRule(min_time_s=1.0, min_samples=1).reason(steady, 0.1) is None  # not enough measured time


def test_compare_catches_nan_and_reports_first_bad():
    ref = torch.arange(10, dtype=torch.float64)
    out = ref.to(torch.float16).clone()
    assert compare(out, ref, 1e-3, 1e-5).ok
    out[7] = float("nan")
    r = compare(out, ref, 1e-3, 1e-5)
    assert not r.ok and r.n_bad == 1 and r.first_bad == 7 and "index 7" in r.message
    out[7] = 7.02  # outside f16 tolerance
    assert not compare(out, ref, 1e-3, 1e-5).ok


def test_poison_never_matches_the_reference():
    out = torch.empty(5, dtype=torch.float32)
    poison(out)
    assert torch.isnan(out).all()
    ints = torch.empty(5, dtype=torch.uint8)
    exp = torch.tensor([0, 1, 255, 7, 128], dtype=torch.uint8)
    poison(ints, exp)
    assert (ints != exp).all()
    assert not compare(ints, exp, 0, 0).ok


def test_records_append_and_resume(tmp_path):
    path = tmp_path / "sweep.jsonl"
    log = ResultLog(path)
    row = {"op": "add", "variant": "f32", "dtype": "f32", "shape": "1x1", "mode": "cold", "status": "ok", "time_us": 1.0}
    log.append(row)
    log.append({**row, "variant": "f32x4", "status": "error"})
    again = ResultLog(path)  # an interrupted sweep restarts: finished rows are kept and skipped
    assert len(again.rows) == 2
    assert again.done() == {("add", "f32", "f32", "1x1", "cold")}  # errors are retried
    for suffix in (".csv", ".json"):
        out = save(again.rows, tmp_path / f"rows{suffix}")
        assert len(load_rows(out)) == 2
    assert list(again.frame()["variant"]) == ["f32", "f32x4"]


def test_registry_errors_name_the_constraint():
    add = get_op("add")
    with pytest.raises(ConfigError, match="unknown op 'nope'; ops are add"):
        get_op("nope")
    with pytest.raises(ConfigError, match="no variant 'f16x4'.*f16x8_pack"):
        add.variant("f16x4", "f16")
    with pytest.raises(ConfigError, match="no 'f64' variants"):
        add.variants_for("f64")
    with pytest.raises(ConfigError, match="vector width 4 is not offered for add f16; widths are 1, 2, 8"):
        add.variant_by_width("f16", 4)
    with pytest.raises(ConfigError, match="every size must be > 0"):
        add.parse_shape("0x5")
    with pytest.raises(ConfigError, match="takes a shape SxK"):
        add.parse_shape("4096")
    with pytest.raises(ConfigError, match="cannot read shape"):
        add.parse_shape("abc")
    with pytest.raises(ConfigError, match="unknown cache mode"):
        expand(add, ["f32"], None, None, ("warm",))


def test_shapes_and_sizes():
    assert parse_size("64MiB") == 64 << 20 and parse_size("2^20+3") == (1 << 20) + 3 and parse_size("1G") == 1 << 30
    assert get_op("copy").parse_shape("1GiB") == (1 << 30,)
    assert get_op("copy").format_shape((1 << 20,)) == "1MiB"


def test_expand_puts_torch_first_per_dtype():
    cfg = expand(get_op("add"), ["f16x8_pack", "f32x4", "torch"], None, ["64x64"], ("cold",))
    names = [(v.dtype, v.name) for v, _, _ in cfg]
    assert names == [("f16", "torch"), ("f16", "f16x8_pack"), ("f32", "torch"), ("f32", "f32x4")]


def test_nvtx_names_have_no_slash():
    assert config_name("add", "f16x8_pack", "4096x4096", "f16") == "add f16x8_pack 4096x4096"
    assert config_name("add", "torch", "4096x4096", "f16") == "add torch f16 4096x4096"
    with pytest.raises(ValueError, match="contains '/'"):
        check_name("a/b")
    for op in labkit.catalog().values():
        for v in op.variants_for():
            for s in op.default_shapes:
                config_name(op.name, v.name, op.format_shape(s), v.dtype)


def test_compile_error_carries_file_and_line():
    log = ("[1/2] nvcc ... -c /x/kernels/add.cu -o add.cuda.o\nFAILED: add.cuda.o\n"
           "/x/kernels/add.cu(42): error: identifier \"oops\" is undefined\n    c[i] = oops;\n           ^\n\n"
           "1 error detected in the compilation of \"/x/kernels/add.cu\".\n")
    e = parse_compile_error(log)
    assert (e.file, e.line) == ("/x/kernels/add.cu", 42)
    assert 'identifier "oops" is undefined' in str(e) and str(e).startswith("/x/kernels/add.cu:42:")


def test_inline_source_errors_point_at_the_cell(tmp_path):
    from labkit import sass
    from labkit.inline_kernel import render

    src = "__global__ void k(const float* a, const float* b, float* c, int64_t n) {\n  c[0] = nope;\n}\n"
    cu = tmp_path / "mine.cu"
    cu.write_text(render(get_op("add"), "mine", src, "k", "f32", 1, 256))
    with pytest.raises(labkit.CompileError) as e:
        sass.compile_cubin(cu, "90", tmp_path / "mine.cubin")
    assert (e.value.file, e.value.line) == ("mine.cu", 2) and "nope" in str(e.value)


def test_inline_checks_its_arguments():
    with pytest.raises(ConfigError, match="must be an identifier"):
        labkit.inline("add", "my-kernel", "", "k", "f16")
    with pytest.raises(ConfigError, match="no `__global__ void k"):
        labkit.inline("add", "mine", "int x;", "k", "f16")
    with pytest.raises(ConfigError, match="no 'f64' variants"):
        labkit.inline("add", "mine", "__global__ void k() {}", "k", "f64")
    with pytest.raises(ConfigError, match="taken by a shipped"):
        get_op("add").add_variant(get_op("add").variant("f32"))


def test_build_key_changes_with_source_and_flags(tmp_path):
    a = tmp_path / "k.cu"
    a.write_text("__global__ void k() {}")
    k1 = build_key([a], ["-O3"])
    assert build_key([a], ["-O2"]) != k1
    a.write_text("__global__ void k() { }")
    assert build_key([a], ["-O3"]) != k1


def test_no_gpu_is_a_plain_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert cli.main(["bench", "add"]) == 2
    assert "No CUDA GPU is visible" in capsys.readouterr().err
    with pytest.raises(NoGPUError):
        labkit.bench("add", ["f32"], shapes=["64x64"], progress=False)


def test_call_rejects_cpu_tensors_without_gpu():
    with pytest.raises(ConfigError, match="tensor 0 is on cpu"):
        labkit.call("add", "f32", torch.ones(4), torch.ones(4))


def test_cli_argument_errors(capsys):
    assert cli.main(["bench", "nope"]) == 2
    assert "unknown op 'nope'" in capsys.readouterr().err
    assert cli.main(["bench", "add", "-v", "f16x4"]) == 2
    assert "no variant 'f16x4'" in capsys.readouterr().err
    assert cli.main(["bench", "add", "--shapes=0x3"]) == 2
    assert "every size must be > 0" in capsys.readouterr().err
    assert cli.main(["bench", "add", "-d", "f16", "-w", "4"]) == 2
    assert "vector width 4 is not offered for add f16; widths are 1, 2, 8" in capsys.readouterr().err
    assert cli.main(["bench", "add", "-w", "8"]) == 2
    assert "--width needs --dtype" in capsys.readouterr().err
    assert cli.main(["sweep", "nope"]) == 2
    assert "unknown sweep" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["bench", "add", "--mode", "warm"])
    assert cli.main(["list"]) == 0
    assert "f16x8_pack" in capsys.readouterr().out
    assert cli.main(["sweep"]) == 0
    assert "access-width" in capsys.readouterr().out


def test_cli_help_explains_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for word in ("bench", "sweep", "sass", "recorded", "checked against a torch reference"):
        assert word in out


def test_recorded_cli_reads_result_files(tmp_path, capsys):
    rows = [{"op": "copy", "variant": f"w{w}", "dtype": "u8", "shape": "1MiB", "mode": "cold", "status": "ok",
             "gbps": 100.0 * w, "gpu": "TestGPU", "driver": "1", "date": "d", "commit": "c"} for w in (1, 16)]
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "access-width.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli.main(["recorded", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "TestGPU" in out and "1600.0" in out
    assert cli.main(["recorded", str(tmp_path / "empty")]) == 2


def test_missing_nvcc_is_a_clear_error(monkeypatch):
    from labkit import sass
    from labkit.errors import ToolMissingError

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sass.Path, "exists", lambda self: False)
    with pytest.raises(ToolMissingError, match="nvcc not found on PATH or in the CUDA toolkit"):
        sass.tool("nvcc")
    with pytest.raises(ToolMissingError, match="pip install nvidia-cuda-cuobjdump"):
        sass.tool("cuobjdump")


def test_build_needs_a_cuda_toolkit(monkeypatch):
    from torch.utils import cpp_extension

    from labkit.build import _require_toolkit
    from labkit.errors import ToolMissingError

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    with pytest.raises(ToolMissingError, match="nvcc was not found: install the CUDA toolkit or set CUDA_HOME"):
        _require_toolkit()
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    with pytest.raises(ToolMissingError, match="CPU-only build"):
        _require_toolkit()


def test_run_names_bad_arguments_before_the_missing_gpu():
    from labkit.runner import Runner

    with pytest.raises(ConfigError, match="offset .* must be >= 0"):
        Runner().run("add", "f32", None, "4x4", offset=-1)
    with pytest.raises(ConfigError, match="unknown cache mode 'warm'"):
        Runner().run("add", "f32", None, "4x4", mode="warm")
    with pytest.raises(ConfigError, match="unknown cache mode 'warm'"):
        from labkit.timing import measure_callable

        measure_callable(lambda: None, mode="warm")


def test_cli_rejects_a_non_positive_budget(capsys):
    for cmd in (["sweep", "seed000"], ["bench", "add"]):
        assert cli.main([*cmd, "--budget", "0"]) == 2
        assert "--budget must be > 0 seconds" in capsys.readouterr().err


def test_inline_rejects_bad_launch_shapes_and_ops_without_a_template():
    src = "__global__ void k(const float* a, const float* b, float* c, int64_t n) {}"
    with pytest.raises(ConfigError, match="block in \\[1, 1024\\]"):
        labkit.inline("add", "mine", src, "k", "f32", block=2048)
    with pytest.raises(ConfigError, match="op 'relu' has no inline launcher template; inline kernels work for"):
        labkit.inline("relu", "mine", src, "k", "f32")


def test_unsupported_dtypes_and_file_types_are_named(tmp_path):
    from labkit.registry import dtype_name

    with pytest.raises(ConfigError, match="dtype torch.float64 is not supported; labkit dtypes are f32"):
        dtype_name(torch.float64)
    with pytest.raises(ValueError, match="choose a .csv, .json or .jsonl file"):
        save([], tmp_path / "rows.txt")
    with pytest.raises(ValueError, match="result files are .jsonl, .json or .csv"):
        load_rows(tmp_path / "rows.txt")


def test_binding_builds_against_this_torch_and_rejects_cpu_tensors():
    # the binding has no CUDA headers, so it also builds against CPU-only torch (as in CI)
    from labkit.build import load_binding

    load_binding()
    with pytest.raises(RuntimeError, match="labkit: tensor 0 is on cpu, expected a CUDA tensor"):
        torch.ops.labkit.launch(1, 0, [torch.ones(3)], [], [])
    with pytest.raises(RuntimeError, match="null launcher address"):
        torch.ops.labkit.launch(0, 0, [], [], [])
