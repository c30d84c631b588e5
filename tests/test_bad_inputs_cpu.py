"""The battery of bad inputs (issue 12 item 5), CPU half: what a careless user tries across the public
API (labkit.call, bench, inline, measure, config.resolve / plan), the CLI, results files, builds,
environment values and Nsight. Each case asserts that the error names the constraint, then that the
session is still usable (`still_usable`). labkit.call on CPU tensors runs every check but the
device one, so the signature checks are tested here without a GPU."""
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

import labkit
from labkit import build, cli, paths
from labkit.config import make_rule, plan, resolve
from labkit.errors import BuildError, ConfigError, LabkitError, ToolMissingError
from labkit.records import LogBusy, ResultLog, check_output, load_rows, save

GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"


def still_usable():
    """After an error: plans still resolve, and a valid call passes every check (on CPU it stops
    at the device check, the last one; on a GPU it runs)."""
    assert [c.variant.name for c in plan("add", ["f32"], None, ["8x8"])] == ["torch", "f32"]
    x = torch.ones(8, 8, device=DEV)
    if GPU:
        assert labkit.call("add", "f32", x, x).sum().item() == 128
    else:
        with pytest.raises(ConfigError, match=r"add: tensor 0 \(a\) is on cpu; labkit kernels take CUDA tensors"):
            labkit.call("add", "f32", x, x)


def f(*s, dt=torch.float32):
    return torch.randn(*s, dtype=dt, device=DEV)


def i32(*s, lo=0, hi=5, dt=torch.int32):
    return torch.randint(lo, hi, s, dtype=dt, device=DEV)


# ---- labkit.call: (op, variant, inputs, params, what the error says) -----------------------------
CALLS = [
    ("add", "f32x4", lambda: [f(1024, 1024), f(1000, 1000)], {},
     r"add: b has shape \(1000, 1000\), a has \(1024, 1024\): add takes equal shapes"),
    ("add", "f32", lambda: [f(100), f(10)], {}, r"add: b has shape \(10,\), a has \(100,\): add takes equal shapes"),
    ("add", "f32", lambda: [f(4, 4), f(16)], {}, "add takes equal shapes"),
    ("add", "f32", lambda: [f(8)], {}, r"add takes 2 tensors \(a, b\), got 1"),
    ("add", "f32", lambda: [f(8), f(8), f(8)], {}, r"add takes 2 tensors \(a, b\), got 3"),
    ("add", "f32", lambda: [], {}, "add: pass the input tensors"),
    ("add", "f32", lambda: [f(8), [1.0] * 8], {}, "add: b is a list, not a torch.Tensor"),
    ("add", "f32", lambda: [f(8), f(8, dt=torch.float16)], {}, "add: b has dtype f16, the variant runs on f32"),
    ("add", "f16x8_pack", lambda: [f(8), f(8)], {}, r"add: a has dtype f32, the variant runs on f16 \(pass a.to"),
    ("add", "torch", lambda: [f(8, dt=torch.float64), f(8, dt=torch.float64)], {}, "a has dtype float64"),
    ("add", "f32", lambda: [f(8, 8).t(), f(8, 8)], {}, r"add: a is not contiguous .*a.contiguous\(\)"),
    ("add", "f32", lambda: [f(1, 1, 1, 1, 2), f(1, 1, 1, 1, 2)], {}, "add: a has 5 dims; labkit launchers take at most 4"),
    ("add", "f32", lambda: [f(0, 3), f(0, 3)], {}, r"add: a is empty \(shape \(0, 3\)\); every size must be > 0"),
    ("add", "f32x5", lambda: [f(8), f(8)], {}, r"no variant 'f32x5'.*did you mean 'f32x4'"),
    ("ad", "f32", lambda: [f(8), f(8)], {}, r"unknown op 'ad'.*did you mean 'add'"),
    ("add", "f32", lambda: [f(8), f(8)], {"bins": 4}, "add takes no parameter bins; its call parameters are none"),
    ("add", "f32", lambda: [f(8), torch.ones(8, device="meta")], {}, "add: b is on meta, a on .*one CUDA device"),
    ("dot", "f32x4", lambda: [f(100), f(10)], {}, "dot: b has length 10, a has 100: dot takes equal lengths"),
    ("dot", "f32", lambda: [f(10, 10), f(10)], {}, r"dot: a must be 1-D \(N\), got shape \(10, 10\)"),
    ("dot", "f32", lambda: [f(10, dt=torch.float16), f(10, dt=torch.float16)], {}, "a has dtype f16, the variant runs on f32"),
    ("sgemv", "k128", lambda: [f(3, 4), f(5)], {}, r"sgemv: x has length 5, A has shape \(3, 4\): sgemv takes A \(M x K\)"),
    ("sgemv", "k32", lambda: [f(12), f(4)], {}, r"sgemv: A must be 2-D \(M x K\)"),
    ("sgemm", "warptile", lambda: [f(3, 4), f(5, 6)], {}, r"sgemm: B has shape \(5, 6\), A has \(3, 4\): the inner dims differ"),
    ("sgemm", "dbuf", lambda: [f(2, 3, 4), f(4, 5)], {}, r"sgemm: A must be 2-D \(M x K\), got shape \(2, 3, 4\)"),
    ("sgemm", "tiled32", lambda: [f(3, 4)], {}, r"sgemm takes 2 tensors \(A \(M x K\), B \(K x N\)\), got 1"),
    ("embedding", "f32", lambda: [i32(7, dt=torch.int64), f(5, 3)], {}, r"embedding: idx has dtype int64, idx must be i32"),
    ("embedding", "f32x4_pack", lambda: [i32(7), f(15)], {}, r"embedding: weight must be 2-D \(MaxV x EmbSize\)"),
    ("embedding", "f16x8_pack", lambda: [i32(2, 7), f(5, 8, dt=torch.float16)], {}, r"embedding: idx must be 1-D \(SeqLen\)"),
    ("embedding", "f32", lambda: [i32(7, lo=5, hi=9), f(5, 3)], {"check": True},
     r"embedding: idx holds \d at position 0, outside \[0, 5\)"),
    ("embedding", "torch", lambda: [i32(7, lo=-3, hi=0), f(5, 3)], {}, r"outside \[0, 5\)"),  # torch's gather would assert
    ("histogram", "i32", lambda: [i32(100)], {}, "histogram: pass bins="),
    ("histogram", "i32x4", lambda: [i32(100)], {"bins": 0}, r"histogram: bins=0 must be in \[1, 2147483647\]"),
    ("histogram", "i32x4_smem", lambda: [i32(100)], {"bins": 2.5}, "bins=2.5 must be an integer >= 1, got a float"),
    ("histogram", "i32", lambda: [i32(100)], {"bins": True}, "bins=True must be an integer >= 1"),
    ("histogram", "i32", lambda: [i32(100)], {"bins": 2**31}, r"must be in \[1, 2147483647\]"),
    ("histogram", "i32", lambda: [i32(100, dt=torch.int64)], {"bins": 5}, "histogram: x has dtype int64, x must be i32"),
    ("histogram", "i32", lambda: [f(100)], {"bins": 5}, "histogram: x has dtype f32, x must be i32"),
    ("histogram", "i32x4", lambda: [i32(100, hi=9)], {"bins": 5, "check": True},
     r"histogram: x holds \d at position \d+, outside \[0, 5\) for bins=5 \(the kernels skip such values"),
    ("histogram", "i32", lambda: [i32(100, lo=-2, hi=0)], {"bins": 5, "check": True}, r"x holds -\d at position 0"),
    ("histogram", "i32", lambda: [i32(100)], {"nbins": 5}, "histogram takes no parameter nbins; its call parameters are bins"),
    ("softmax", "f32x4", lambda: [f(3, 4)], {}, r"softmax: x must be 1-D \(n\), got shape \(3, 4\)"),
    ("softmax_rows", "f16x8", lambda: [f(12, dt=torch.float16)], {}, r"softmax_rows: x must be 2-D \(N x K\)"),
    ("layer_norm", "f32x4", lambda: [f(2, 3, 4)], {}, r"layer_norm: x must be 2-D \(N x K\), got shape \(2, 3, 4\)"),
    ("rms_norm", "f16x8", lambda: [f(4, 8)], {}, "rms_norm: x has dtype f32, the variant runs on f16"),
    ("relu", "f32", lambda: [f(8), f(8)], {}, r"relu takes 1 tensor \(x\), got 2"),
    ("sigmoid", "f16x8_pack", lambda: [f(8, dt=torch.bfloat16)], {}, "sigmoid: x has dtype bf16, the variant runs on f16"),
    ("copy", "w16", lambda: [f(8)], {}, r"copy: x has dtype f32, the variant runs on u8 \(copy moves bytes: pass x.view"),
    ("copy_gs", "int4", lambda: [f(8)], {}, "copy_gs: x has dtype f32, the variant runs on i32"),
    ("reduce_sum", "f32x4", lambda: [f(8, dt=torch.bfloat16)], {}, "reduce_sum: x has dtype bf16, the variant runs on f32"),
]


@pytest.mark.parametrize("op,variant,make,params,match", CALLS,
                         ids=[f"{c[0]}-{c[1]}-{k}" for k, c in enumerate(CALLS)])
def test_call_names_op_argument_and_constraint(op, variant, make, params, match):
    with pytest.raises(ConfigError, match=match):
        labkit.call(op, variant, *make(), **params)
    still_usable()


@pytest.mark.skipif(GPU, reason="the device check itself: CPU tensors")
def test_call_on_cpu_tensors_reaches_the_device_check_last():
    for op, variant, inputs, params in [("histogram", "i32", [i32(100)], {"bins": 5, "check": True}),
                                        ("sgemm", "warptile", [f(3, 4), f(4, 6)], {}),
                                        ("embedding", "f32", [i32(7), f(5, 3)], {"check": True})]:
        with pytest.raises(ConfigError, match=rf"{op}: tensor 0 \(\w+\) is on cpu; labkit kernels take CUDA tensors"):
            labkit.call(op, variant, *inputs, **params)
    still_usable()


# ---- bench, resolve, plan, rules, sweeps, inline, measure: (call, error, what it says) -----------
SRC = "__global__ void k(const float* a, const float* b, float* c, int64_t n) {}"
PENDING: dict = {}  # cases that wait for a change elsewhere (none left)
API = [
    ("bench-op", lambda: labkit.bench("ad", progress=False), ConfigError, r"unknown op 'ad'.*did you mean 'add'"),
    ("bench-variant", lambda: labkit.bench("add", ["f16x8pack"], progress=False), ConfigError,
     r"no variant 'f16x8pack'.*did you mean 'f16x8_pack'"),
    ("bench-shape-zero", lambda: labkit.bench("add", shapes=["0x3"]), ConfigError, "every size must be > 0"),
    ("bench-shape-text", lambda: labkit.bench("add", shapes=["4096y4096"]), ConfigError,
     r"cannot read shape '4096y4096' for add: expected SxK, e.g. 1024x1024"),
    ("bench-shape-arity", lambda: labkit.bench("add", shapes=["4096"]), ConfigError, r"add takes a shape SxK \(2 numbers"),
    ("bench-shape-huge", lambda: labkit.bench("add", shapes=["1x2^41"]), ConfigError, "sizes must be < 2.40"),
    ("bench-mode", lambda: labkit.bench("add", modes=("warm",)), ConfigError, "unknown cache mode 'warm'; modes are cold, cold-dirty, rotating, hot"),
    ("bench-dtype", lambda: labkit.bench("add", dtype="f61"), ConfigError, r"no 'f61' variants.*did you mean 'f16'"),
    ("bench-width-no-dtype", lambda: labkit.bench("add", width=8), ConfigError, "a vector width needs a dtype"),
    ("bench-width", lambda: labkit.bench("add", dtype="f16", width=4), ConfigError,
     "vector width 4 is not offered for add f16; widths are 1, 2, 8"),
    ("bench-out-suffix", lambda: labkit.bench("add", out="rows.txt"), ConfigError, r"suffix must be one of .jsonl, .json, .csv"),
    ("bench-budget", lambda: labkit.bench("add", budget_s=0), ConfigError, r"budget_s .* must be > 0"),
    ("bench-rule-name", lambda: labkit.bench("add", budget=1), ConfigError, r"unknown stop-rule setting\(s\) budget"),
    ("bench-axis-value", lambda: labkit.bench("add", axes={"block": [100]}), ConfigError,
     "add axis block=100 is not offered; values are 64, 128, 256, 512, 1024"),
    ("bench-axis-name", lambda: labkit.bench("add", axes={"blok": [128]}), ConfigError, "add has no tuning axis 'blok'"),
    ("axis-suggest", lambda: plan("add", axes={"blok": [128]}), ConfigError, "did you mean 'block'"),
    ("plan-offset", lambda: plan("add", ["f32"], None, ["8x8"], offset=-1), ConfigError, r"offset .* must be an int >= 0"),
    ("plan-dtype", lambda: plan("add", ["f32"], "f64"), ConfigError, r"op 'add' has no 'f64' variants; its dtypes are"),
    ("resolve-offset", lambda: resolve("add", "f32", None, "8x8", offset=-1), ConfigError, r"offset .* must be an int >= 0"),
    ("resolve-offset-float", lambda: resolve("add", "f32", None, "8x8", offset=1.5), ConfigError, "must be an int >= 0"),
    ("resolve-dtype", lambda: resolve("add", "f32", "f16", "8x8"), ConfigError, "no variant 'f32' with dtype 'f16'"),
    ("resolve-torch-dtype", lambda: resolve("add", "torch", "f64", "8x8"), ConfigError, r"no 'f64' variants.*did you mean"),
    ("resolve-shape-list", lambda: resolve("add", "f32", None, [1, "a"]), ConfigError, "as text or integers"),
    ("resolve-shape-negative", lambda: resolve("dot", "f32", None, [-4]), ConfigError, "every size must be > 0"),
    ("mode-suggest", lambda: resolve("add", "f32", None, "8x8", mode="cld"), ConfigError, "did you mean 'cold'"),
    ("rule-type", lambda: make_rule("fast"), ConfigError, "rule must be a StopRule or a dict of its fields, got str"),
    ("rule-noise", lambda: make_rule(noise_target=2), ConfigError, r"noise_target must be in \(0, 1\)"),
    ("rule-samples", lambda: make_rule(min_samples=10, max_samples=5), ConfigError, "need 1 <= min_samples <= max_samples"),
    ("sweep-name", lambda: __import__("labkit.sweeps").sweeps.get_sweep("seed00"), ConfigError,
     r"unknown sweep 'seed00'.*did you mean 'seed000'"),
    ("inline-torch", lambda: labkit.inline("add", "torch", SRC, "k", "f32"), ConfigError,
     "variant name 'torch' is taken by add's baseline"),
    ("inline-shipped", lambda: labkit.inline("add", "f16x8_pack", SRC, "k", "f16"), ConfigError,
     "variant name 'f16x8_pack' is taken by add's shipped variant"),
    ("inline-identifier", lambda: labkit.inline("add", "my-add", SRC, "k", "f32"), ConfigError, "must be an identifier"),
    ("inline-op", lambda: labkit.inline("ad", "mine", SRC, "k", "f32"), ConfigError, r"unknown op 'ad'.*did you mean 'add'"),
    ("inline-no-template", lambda: labkit.inline("relu", "mine", SRC, "k", "f32"), ConfigError,
     "op 'relu' has no inline launcher template; inline kernels work for"),
    ("inline-block", lambda: labkit.inline("add", "mine", SRC, "k", "f32", block=2048), ConfigError,
     r"block \(threads per block\) must be an int in \[1, 1024\]"),
    ("inline-width", lambda: labkit.inline("add", "mine", SRC, "k", "f32", width=0), ConfigError,
     r"width \(elements per vector access\) must be an int >= 1"),
    ("inline-kernel", lambda: labkit.inline("add", "mine", SRC, "kk", "f32"), ConfigError,
     r"the source defines no `__global__ void kk\(...\)`"),
    ("inline-dtype", lambda: labkit.inline("add", "mine", SRC, "k", "f61"), ConfigError, r"no 'f61' variants.*did you mean"),
    ("measure-mode", lambda: labkit.measure(lambda: None, mode="warm"), ConfigError, "unknown cache mode 'warm'"),
    ("measure-rule", lambda: labkit.measure(lambda: None, budget_s=-1), ConfigError, r"budget_s .* must be > 0"),
    ("measure-rule-name", lambda: labkit.measure(lambda: None, samples=3), ConfigError, "unknown stop-rule setting"),
    ("measure-callable", lambda: labkit.measure(42), ConfigError, "callable"),
    ("measure-no-gpu", lambda: labkit.measure(lambda: None) if not GPU else pytest.skip("has a GPU"),
     labkit.NoGPUError, "No CUDA GPU"),
]


def _pending(cases):
    return [pytest.param(*c, id=c[0], marks=pytest.mark.xfail(strict=True, reason=f"needs: {PENDING[c[0]]}"))
            if c[0] in PENDING else pytest.param(*c, id=c[0]) for c in cases]


@pytest.mark.parametrize("name,fn,exc,match", _pending(API))
def test_api_errors_name_the_constraint(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
    still_usable()


def test_inline_names_never_replace_the_baseline_or_a_shipped_variant():
    add = labkit.get_op("add")
    before = list(add.variants)
    for name in ("torch", "f32x4"):
        with pytest.raises(ConfigError, match="choose another name"):
            labkit.inline("add", name, SRC, "k", "f32")
        with pytest.raises(ConfigError, match="choose another name"):
            add.add_variant(labkit.registry.Variant(name, "f32", source=paths.ROOT / "x.cu"))
    assert add.variants == before and add.variant("torch", "f32").note == "torch baseline"
    still_usable()


# ---- the CLI: exit status 2, "labkit: error: ...", and nothing runs before the check --------------
@pytest.fixture
def nothing_runs(monkeypatch, tmp_path):
    def ran(*a, **k):
        raise AssertionError("a measurement started before the arguments were checked")

    monkeypatch.setattr(cli, "_run", ran)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    (tmp_path / "rows.csv").mkdir()
    (tmp_path / "rows.json").mkdir()


CLI = [
    (["bench", "nope"], r"unknown op 'nope'"),
    (["bench", "add", "-v", "f16x4"], r"no variant 'f16x4'.*did you mean"),
    (["bench", "add", "-s", "0x3"], "every size must be > 0"),
    (["bench", "add", "-d", "f61"], r"no 'f61' variants.*did you mean 'f16'"),
    (["bench", "add", "-w", "8"], "a vector width needs a dtype"),  # labkit.config checks it, not the CLI again
    (["bench", "add", "-d", "f16", "-w", "4"], "vector width 4 is not offered for add f16"),
    (["bench", "add", "--csv", "out.txt"], r"--csv out.txt: the suffix must be one of .csv, got '.txt'"),
    (["bench", "add", "--csv", "rows.csv"], "--csv rows.csv is a folder"),
    (["bench", "add", "--csv", "afile/rows.csv"], r"--csv afile/rows.csv: cannot create its folder"),
    (["bench", "add", "--json", "rows.csv"], r"--json rows.csv: the suffix must be one of .json"),
    (["bench", "add", "--json", "rows.json"], "--json rows.json is a folder"),
    (["bench", "add", "--json", "afile/x/rows.json"], "cannot create its folder"),
    (["sweep", "seed000", "-o", "x.csv"], r"sweep file \(-o; .*use --csv for a CSV copy\) x.csv: the suffix must be one of .jsonl"),
    (["sweep", "seed000", "--csv", "afile/x.csv"], "cannot create its folder"),
    (["sweep", "seed00"], r"unknown sweep 'seed00'.*did you mean 'seed000'"),
    (["sweep", "seed000", "nosuch"], r"unknown sweep 'nosuch'"),  # every name checked before the first runs
    (["sweep", "seed000", "dot", "--csv", "x.csv"], r"-o / --csv / --json name one sweep's files"),
    (["bench", "add", "--budget", "0"], "must be > 0"),
    (["bench", "add", "--noise", "1.5"], r"(noise_target|--noise) must be in \(0, 1\)"),
    (["bench", "add", "--axis", "block=abc"], "--axis 'block=abc': expected NAME=V1,V2 with integer values"),
    (["bench", "add", "--axis", "block="], "give at least one value"),
    (["bench", "add", "--axis", "blok=128"], "add has no tuning axis 'blok'"),
    (["bench", "add", "--offset", "-1"], r"offset .* must be an int >= 0"),
    (["list", "ad"], r"unknown op 'ad'.*did you mean 'add'"),
    (["why", "add", "f16x8pak"], r"no variant 'f16x8pak'.*did you mean 'f16x8_pack'"),
    (["why", "add", "f16x8", "--budget", "-1"], r"budget_s .* must be > 0"),  # checked without a GPU too
    (["sass", "add", "--arch", "90;touch x"], "is not a compute capability list"),
    (["recorded", "no/such/folder"], "no recorded results under no/such/folder"),
    (["profile", "add", "--sweep", "seed000"], "give an op .* or a sweep name, not both"),
    (["profile", "add", "--ncu"], "profile --ncu needs an op and -v variants"),
    (["profile", "add", "-s", "64x64", "--nsys", "/no/such/nsys"],
     r"nsys \(Nsight Systems\) not found at /no/such/nsys\nOn a machine with Nsight Systems and a GPU, run:\n  nsys profile"),
]
CLI_PENDING: dict = {}


@pytest.mark.parametrize("argv,match", [
    pytest.param(a, m, id=" ".join(a), marks=[pytest.mark.xfail(strict=True, reason=CLI_PENDING[a[2]])]
                 if len(a) > 2 and a[2] in CLI_PENDING else []) for a, m in CLI])
def test_cli_refuses_with_status_2_before_anything_runs(nothing_runs, capsys, argv, match):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("labkit: error: ") and re.search(match, err), err
    assert cli.main(["list", "add"]) == 0 and "f16x8_pack" in capsys.readouterr().out
    assert not os.path.exists("x")  # nothing reached a shell


def test_cli_bad_choice_is_argparse_status_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "add", "--mode", "warm"])
    assert e.value.code == 2 and "invalid choice: 'warm'" in capsys.readouterr().err
    still_usable()


# ---- results files ----------------------------------------------------------------------------
ROW = {"op": "add", "variant": "f32", "dtype": "f32", "shape": "8x8", "mode": "cold", "status": "ok", "time_us": 1.5,
       "gpu": "G", "commit": "67179e8", "driver": "580", "date": "2026-11-23"}


def test_a_truncated_line_is_skipped_with_file_and_line(tmp_path):
    p = tmp_path / "seed.jsonl"
    save([ROW, {**ROW, "variant": "f32x4"}], p)
    with p.open("a") as fh:
        fh.write('{"op": "add", "vari\n[1, 2]\n')  # a killed write, then a line that is no row
    with pytest.warns(UserWarning) as w:
        rows = load_rows(p)
    assert [r["variant"] for r in rows] == ["f32", "f32x4"]
    msgs = [str(x.message) for x in w]
    assert any(f"{p}:3: skipped a malformed line" in m for m in msgs) and any(f"{p}:4:" in m for m in msgs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = ResultLog(p)  # resume from the good rows, append after the bad ones
        log.append({**ROW, "variant": "bf16"})
        log.close()
        assert [r["variant"] for r in load_rows(p)] == ["f32", "f32x4", "bf16"]
        assert cli.main(["recorded", str(p)]) == 0
    still_usable()


def test_csv_round_trip_keeps_strings(tmp_path):
    p = save([ROW, {**ROW, "commit": "0012345", "shape": "4096x4096", "time_us": None}], tmp_path / "rows.csv")
    rows = load_rows(p)
    assert [r["commit"] for r in rows] == ["67179e8", "0012345"] and rows[1]["shape"] == "4096x4096"
    assert rows[0]["time_us"] == 1.5 and rows[1]["time_us"] is None and rows[0]["driver"] == "580"
    still_usable()


def test_a_second_writer_gets_log_busy(tmp_path):
    p = tmp_path / "sweep.jsonl"
    first = ResultLog(p).lock()
    with pytest.raises(LogBusy, match=f"another labkit process is writing {re.escape(str(p))}"):
        ResultLog(p).lock()
    first.close()
    ResultLog(p).lock().close()  # free again once the first writer is done
    still_usable()


@pytest.mark.parametrize("name,text,match", [
    ("rows.json", "[{", "not valid JSON"), ("rows.json", '{"op": "add"}', "expected a JSON list of rows"),
    ("rows.txt", "", r"result files are .jsonl, .json or .csv")])
def test_unreadable_result_files_name_the_file(tmp_path, name, text, match):
    (tmp_path / name).write_text(text)
    with pytest.raises(LabkitError, match=match):
        load_rows(tmp_path / name)
    still_usable()


def test_output_paths_are_checked_before_writing(tmp_path):
    (tmp_path / "afile").write_text("")
    for path, match in [(tmp_path / "rows.txt", "suffix must be one of"), (tmp_path / "afile" / "r.csv", "cannot create"),
                        (tmp_path, "suffix must be one of")]:
        with pytest.raises(ConfigError, match=match):
            save([ROW], path)
    with pytest.raises(ConfigError, match="results file .*suffix must be one of .jsonl"):
        ResultLog(tmp_path / "rows.csv")
    assert check_output(tmp_path / "new" / "rows.csv").parent.is_dir()
    still_usable()


# ---- builds: locks, broken libraries -------------------------------------------------------------
def _holder(lock):
    """A process holding the build folder's lock, as a build in progress does."""
    code = f"import filelock, time; k = filelock.FileLock({str(lock)!r}); k.acquire(); print('held', flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_lock_left_by_a_killed_build_is_taken_over(tmp_path, capsys):
    p = _holder(tmp_path / ".labkit.lock")
    (tmp_path / ".labkit.owner").write_text(f"pid {p.pid}")
    (tmp_path / "lock").write_text("")  # torch.utils.cpp_extension's own lock, left by the killed build
    p.kill()
    p.wait()
    with build._FolderLock(tmp_path, wait_s=5):
        assert not (tmp_path / "lock").exists()
    assert "took over a stale build lock" in capsys.readouterr().err
    still_usable()


def test_a_live_build_is_waited_for_visibly_and_boundedly(tmp_path, capsys):
    p = _holder(tmp_path / ".labkit.lock")
    (tmp_path / ".labkit.owner").write_text(f"pid {p.pid}")
    try:
        with pytest.raises(BuildError, match=f"pid {p.pid} has been building .* if it is not running, remove"):
            with build._FolderLock(tmp_path, wait_s=0.1):
                pass
        assert f"waiting for pid {p.pid} to finish building" in capsys.readouterr().err
    finally:
        p.kill()
        p.wait()
    with build._FolderLock(tmp_path, wait_s=5):
        pass
    still_usable()


@pytest.mark.parametrize("second", ["loads", "broken"])
def test_a_library_that_does_not_load_is_rebuilt_once(tmp_path, monkeypatch, capsys, second):
    good = torch.__path__[0] + "/lib/libc10.so"  # a library that loads
    made = []

    def fake_build(name, key, sources, flags, build_dir, verbose):
        build_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        so = build_dir / f"lk_{name}_{key}.so"
        so.write_bytes(open(good, "rb").read() if made and second == "loads" else b"\x7fELF truncated")
        made.append(so)
        return so

    monkeypatch.setattr(build, "_build", fake_build)
    monkeypatch.setattr(build, "_libraries", {})
    src = tmp_path / "k.cu"
    src.write_text(f"// {second}")
    if second == "loads":
        assert build.build_library("fake", [src], arch="90").handle()
    else:
        with pytest.raises(BuildError, match=r"the library in \S+fake-sm90-\w+ does not load after a rebuild"):
            build.build_library("fake", [src], arch="90")
    assert len(made) == 2 and "does not load" in capsys.readouterr().err
    still_usable()


# ---- environment values: never a shell, never another user's library -----------------------------
@pytest.mark.parametrize("arch", ["90/../..", "`touch x`", "90;touch x", "$(touch x)", "90 91", "sm_90"])
def test_labkit_arch_is_refused_before_any_build(tmp_path, monkeypatch, arch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABKIT_ARCH", arch)
    monkeypatch.setattr(build, "_build", lambda *a: pytest.fail("reached the build"))
    (tmp_path / "k.cu").write_text("// k")
    with pytest.raises(ConfigError, match="is not a compute capability list: use digits with an optional letter"):
        build.build_library("k", [tmp_path / "k.cu"])
    assert not (tmp_path / "x").exists()
    monkeypatch.setenv("LABKIT_ARCH", "90")
    assert build.target_arch() == "90"
    still_usable()


@pytest.mark.parametrize("cache", ["/tmp/a$(touch x)", "/tmp/`touch x`", "/tmp/a b", "/tmp/a;touch x", "/tmp/a|b"])
def test_labkit_cache_with_shell_characters_is_refused(tmp_path, monkeypatch, cache):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABKIT_CACHE", cache)
    with pytest.raises(ConfigError, match="LABKIT_CACHE=.* is not a plain path: use letters, digits and"):
        paths.cache_root()
    assert not os.path.exists(cache) and not (tmp_path / "x").exists()
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "cache"))
    assert paths.cache_root().stat().st_mode & 0o777 == 0o700
    still_usable()


def _foreign(monkeypatch, path):
    """os.stat of `path` reports another owner."""
    real = os.stat

    def stat(p, *a, **k):
        st = real(p, *a, **k)
        return os.stat_result([*st[:4], st.st_uid + 1, *st[5:]]) if os.fspath(p) == str(path) else st

    monkeypatch.setattr(os, "stat", stat)


def test_a_cache_of_another_user_or_open_to_others_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("LABKIT_CACHE", str(root))
    with monkeypatch.context() as m:
        _foreign(m, root)
        with pytest.raises(ConfigError, match="belongs to another user .*set LABKIT_CACHE to a folder of yours"):
            paths.cache_root()
    root.chmod(0o770)
    with pytest.raises(ConfigError, match=r"is writable by others \(mode 0o770\); run `chmod 700"):
        paths.cache_root()
    root.chmod(0o700)
    assert paths.cache_root() == root
    so = root / "lk.so"
    so.write_bytes(b"")
    with monkeypatch.context() as m:
        _foreign(m, so)
        with pytest.raises(BuildError, match="owned by uid .*labkit loads only libraries of its own user"):
            build._owned(so)
    so.chmod(0o666)
    with pytest.raises(BuildError, match=r"\(mode 0o666\)"):
        build._owned(so)
    still_usable()


# ---- Nsight: a missing or hanging tool names the command to run elsewhere ------------------------
def test_nsight_without_its_tools_names_the_command(tmp_path, monkeypatch):
    from labkit import nsight
    from labkit.nsight import tools

    monkeypatch.setenv("PATH", str(tmp_path))
    for var in ("LABKIT_NSYS", "LABKIT_NCU"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tools, "SEARCH_GLOBS", ())
    with pytest.raises(ToolMissingError, match=r"(?s)nsys \(Nsight Systems\) not found.*Nsight Systems and a GPU, run:\n"
                                                r"  nsys profile .*labkit.cli bench add"):
        nsight.profile("add", ["f32"], ["64x64"])
    with pytest.raises(ToolMissingError, match=r"(?s)ncu \(Nsight Compute\) not found.*Nsight Compute and a GPU, run:\n  LABKIT_BLOCKING=0 ncu "):
        nsight.ncu_metrics("add", "f32x4", "64x64")
    with pytest.raises(ConfigError, match="unknown op 'ad'"):  # names are checked before looking for the tool
        nsight.profile("ad", ["f32"])
    still_usable()


def test_a_tool_that_hangs_or_is_missing_is_named(tmp_path):
    from labkit.nsight.tools import run_tool

    with pytest.raises(LabkitError, match=r"nsys stats did not finish in 0.3 s and was stopped.*\n  sleep 30"):
        run_tool(["sleep", "30"], 0.3, "nsys stats")
    with pytest.raises(ToolMissingError, match=r"nsys export: cannot run /no/such/nsys .*\n  /no/such/nsys export"):
        run_tool(["/no/such/nsys", "export"], 5, "nsys export")
    still_usable()


def test_memory_torch_holds_cached_is_free_to_a_configuration(monkeypatch):
    """The f32 add at 2^31 values, after the f16 ones, was refused with 51 of 140 GiB free while this
    process's own torch cache held the rest (H200, logs/e0185505cfbf/call4): the check now empties
    that cache and looks again before it refuses, and still refuses what does not fit."""
    from labkit.runner import Runner

    class Allocating(Exception):
        """The memory check passed: the first buffer set's generator is made."""

    state = {"emptied": 0, "cache": 100 << 30}

    def mem_get_info():
        return (2 << 30) + (state["cache"] if state["emptied"] else 0), 140 << 30

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: state.update(emptied=state["emptied"] + 1))
    monkeypatch.setattr(torch, "Generator", lambda *a, **k: (_ for _ in ()).throw(Allocating()))
    cfg = plan("add", ["f32x4"], None, ["32768x32768"], ("hot",))[1]  # 12 GiB moved: needs 37 GiB
    with pytest.raises(Allocating):
        Runner(peak=False, kernel_time=False)._inputs(cfg)
    assert state["emptied"] == 1
    state.update(emptied=0, cache=0)                                  # a cache that held nothing
    with pytest.raises(ConfigError, match=r"needs about 37.0 GiB of GPU memory; 2.0 GiB of 140.0 GiB are free"):
        Runner(peak=False, kernel_time=False)._inputs(cfg)
    still_usable()
