"""labkit.nsight without a GPU or Nsight: parsing of the real nsys/ncu outputs committed in
tests/data/nsight-h200 (exact numbers from the files), command construction, tool discovery with
fake executables, missing-tool / permission / timeout errors (every tool run bounded, nsys stats
and export included), and the range attribution and cross-check on a synthetic (but
self-consistent) nsys SQLite export of the runner's phases."""
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from labkit import nsight, toolkit
from labkit.cli import main
from labkit.errors import ConfigError, LabkitError, ToolMissingError
from labkit.nsight import names, nsys, profiling, tools

DATA = Path(__file__).resolve().parent / "data" / "nsight-h200"
PY = sys.executable
ADD_PACK = "void add_kernel<__half, (int)8, (int)16>(const T1 *, const T1 *, T1 *, lk_split)"
ADD_X8 = "void add_kernel<__half, (int)8, (int)4>(const T1 *, const T1 *, T1 *, lk_split)"
TORCH_ADD = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::Half>, "
             "std::array<char *, (unsigned long)3>>(int, T2, T3)")
FLUSH = "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>(T3)"
BLOCK = "lk_block_kernel(volatile int *, unsigned long)"
FILL = "void at::native::vectorized_elementwise_kernel<(int)8, at::native::FillFunctor<c10::Half>>(int, T2, T3)"
REF = "void at::native::vectorized_elementwise_kernel<(int)2, at::native::CUDAFunctor_add<double>>(int, T2, T3)"


# ------------------------------------------------------------------ committed nsys stats CSVs
def test_nvtx_sum():
    r = nsight.nvtx_ranges(DATA / "stats_nvtx_sum.csv").set_index("range")
    assert len(r) == 12  # the two CCCL ranges are another domain's
    assert r.loc["add f16x8_pack 4096x4096", "kind"] == "config"
    assert r.loc["add f16x8_pack 4096x4096", "instances"] == 2
    assert r.loc["add f16x8_pack 4096x4096", "total_ms"] == pytest.approx(432.128176)
    assert r.loc["timed", "instances"] == 12 and r.loc["timed", "kind"] == "phase"
    assert r.loc["bench add", "kind"] == "bench" and r.loc["add", "kind"] == "op"
    assert r.loc["warmup", "median_ms"] == pytest.approx(10.0257045)


def test_cuda_gpu_kern_sum():
    k = nsight.read_stats_csv(DATA / "stats_cuda_gpu_kern_sum.csv")
    row = k[k["Name"] == ADD_PACK].iloc[0]
    assert row["Instances"] == 7133 and row["Med (ns)"] == 2784.0 and row["Total Time (ns)"] == 80804998
    assert len(k) == 34


def test_config_kernels_from_nvtx_kern_sum():
    k = nsight.config_kernels(DATA / "stats_nvtx_kern_sum.csv")
    assert set(k["variant"]) == {"f16x8", "f16x8_pack", "torch"}
    v = k[k["variant_kernel"]].set_index(["variant", "shape"])
    assert len(v) == 6  # exactly one kernel of its own per config: the one it launched in warmup
    assert v.loc[("f16x8_pack", "4096x4096"), "kernel"] == "add_kernel<__half, 8, 16>"
    assert v.loc[("f16x8_pack", "4096x4096"), "launches"] == 3083
    assert v.loc[("f16x8_pack", "4096x4096"), "median_us"] == pytest.approx(22.304)
    assert v.loc[("f16x8", "4096x4096"), "kernel"] == "add_kernel<__half, 8, 4>"
    assert v.loc[("f16x8", "4096x4096"), "median_us"] == pytest.approx(26.080)
    assert v.loc[("torch", "1024x1024"), "short"] == "vectorized_elementwise_kernel"
    assert v.loc[("torch", "1024x1024"), "launches"] == 5826
    assert k["mode"].isna().all() and k["phase"].isna().all()  # nvtx_kern_sum pools them


def test_bench_log_and_pooled_cross_check():
    recs = nsight.parse_bench_log(DATA / "bench.log")
    assert len(recs) == 12
    assert recs[1] == {"op": "add", "variant": "f16x8", "dtype": "f16", "shape": "4096x4096", "mode": "cold",
                       "status": "ok", "time_us": pytest.approx(28.512)}
    assert recs[0]["variant"] == "torch" and recs[0]["dtype"] == "f16"
    c = nsight.cross_check(recs, nsight.config_kernels(DATA / "stats_nvtx_kern_sum.csv"))
    row = c[(c["variant"] == "f16x8_pack") & (c["shape"] == "4096x4096") & (c["mode"] == "cold")].iloc[0]
    assert row["nsys_us"] == pytest.approx(22.304) and row["diff_us"] == pytest.approx(24.704 - 22.304)
    assert (c["result"] == "pooled").all() and c["pass"].isna().all()  # no per-mode verdict from pooled data


# ------------------------------------------------------------------------- committed ncu CSVs
def test_ncu_timed_range():
    df = nsight.read_ncu_csv(DATA / "ncu_f16x8_pack_timed_fullpath.csv")
    assert list(df["id"]) == [0, 1, 2]
    r = df.iloc[1]
    assert r["kernel"] == "add_kernel<__half, 8, 16>" and r["nvtx"] == "bench add/add/add f16x8_pack 4096x4096/timed"
    assert r["duration_us"] == pytest.approx(23.648)
    assert r["dram_read_bytes"] == 67_114_240 and r["dram_write_bytes"] == 15_466_752
    assert r["dram_pct_peak"] == pytest.approx(72.77) and r["registers"] == 22
    assert r["dram_gbps"] == pytest.approx(82_580_992 / 23.648e-6 / 1e9)
    m = nsight.with_model(df.iloc[[1]], "add", "f16x8_pack", "4096x4096", "f16").iloc[0]
    assert m["model_bytes"] == 3 * 4096 * 4096 * 2
    assert m["measured_over_model"] == pytest.approx(82_580_992 / 100_663_296)


def test_ncu_config_range_catches_other_kernels():
    # the config range alone (no -k filter) profiles the inputs' generation first, not the variant
    df = nsight.read_ncu_csv(DATA / "ncu_f16x8_range.csv")
    assert len(df) == 3 and not df["kernel"].str.startswith("add_kernel").any()
    assert df.iloc[1]["dram_read_bytes"] == 67_115_776 and df.iloc[1]["registers"] == 32
    assert nsight.read_ncu_csv(DATA / "ncu_no_match.txt").empty


def test_recorded_ncu_keeps_variant_kernels():
    df = nsight.recorded_ncu(DATA)
    assert list(df["variant"]) == ["f16x8_pack"] and list(df["shape"]) == ["4096x4096"]
    assert df.iloc[0]["file"] == "ncu_f16x8_pack_timed_fullpath.csv"


def test_recorded_profile_from_raw_outputs():
    p = nsight.recorded_profile(DATA)
    assert p.source.startswith("recorded") and "H200" in p.meta["about"] and "279e965" in p.meta["about"]
    assert len(p.check) == 12 and len(p.ranges) == 12
    assert p.plot().data  # plotly figure with traces


# ------------------------------------------------------------------------------- names
def test_kernel_names():
    assert nsight.kernel_template(ADD_PACK) == "add_kernel<__half, 8, 16>"
    assert nsight.kernel_short(ADD_PACK) == "add_kernel"
    assert nsight.kernel_short(BLOCK) == "lk_block_kernel"
    assert nsight.kernel_short(TORCH_ADD) == "vectorized_elementwise_kernel"
    assert nsight.parse_config("add torch f16 4096x4096") == {"op": "add", "variant": "torch", "dtype": "f16",
                                                               "shape": "4096x4096"}
    assert nsight.parse_config("bench add") is None and nsight.range_kind("timed hot") == "phase"
    assert nsight.range_kind("sweep seed000") == "sweep" and nsight.range_kind("copy w16 256MiB") == "config"


def test_range_names_of_the_runner():
    # the runner's phases since the renovation: a re-check after timing, CUPTI's kernel-time run
    assert nsight.range_kind("recheck") == "phase" and nsight.range_kind("kernel time") == "phase"
    assert names.phase_of("timed cold") == "timed" and names.phase_of("kernel time") == "kernel time"
    # a variant at tuning-axis values, as Config.variant_s writes it into records and range names
    assert nsight.parse_config("add f16x8_pack[block=512] 4096x4096") == {
        "op": "add", "variant": "f16x8_pack[block=512]", "dtype": None, "shape": "4096x4096"}
    assert nsight.range_kind("add f16x8_pack[block=512] 4096x4096") == "config"


def test_fill_dtype_reads_variant_labels():
    import pandas as pd

    df = pd.DataFrame([{"op": "add", "variant": "f16x8_pack[block=512]", "dtype": None},
                       {"op": "add", "variant": "torch", "dtype": None},          # several dtypes: unknown
                       {"op": "copy", "variant": "torch", "dtype": None},         # one dtype: that one
                       {"op": "add", "variant": "nosuch", "dtype": None}])
    d = names.fill_dtype(df)["dtype"]
    assert d[0] == "f16" and d[2] == "u8" and d[[1, 3]].isna().all()


def test_goal():
    assert nsight.goal("cold", 25.0) == ("<= 3 %", pytest.approx(0.75))
    assert nsight.goal("hot", 2.0) == ("<= 1 µs", 1.0)
    assert nsight.goal("cold", 5.0)[1] is None


# ---------------------------------------------------------------------------- commands
def test_commands():
    app = nsight.bench_argv("add", ["f16x8", "torch"], ["4096x4096", "1024x1024"], ("cold", "hot"), None, 0.2,
                            "/r/labkit.json", python="py")
    # the run under nsys: in this process (its NVTX ranges), CUPTI left to nsys
    assert app == ["py", "-m", "labkit.cli", "bench", "add", "--in-process", "-v", "f16x8,torch", "-s", "4096x4096",
                   "1024x1024", "--mode", "cold", "hot", "--budget", "0.2", "--json", "/r/labkit.json",
                   "--no-kernel-time"]
    assert nsight.bench_argv("add", "f16x8_pack", "4096x4096", "cold", "f16", None, python="py", kernel_time=True,
                             axes={"block": [128, 512]}) == [
        "py", "-m", "labkit.cli", "bench", "add", "--in-process", "-v", "f16x8_pack", "-d", "f16", "-s", "4096x4096",
        "--mode", "cold", "--axis", "block=128,512"]  # kernel_us is recorded by default
    assert nsight.sweep_argv("seed000", "/r/x.jsonl", 0.5, python="py") == [
        "py", "-m", "labkit.cli", "sweep", "seed000", "-o", "/r/x.jsonl", "--in-process", "--budget", "0.5",
        "--no-kernel-time"]
    assert nsight.nsys_profile_argv("nsys", "/r/labkit", ["py", "x"]) == [
        "nsys", "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
        "--force-overwrite=true", "-o", "/r/labkit", "py", "x"]
    assert nsight.nsys_stats_argv("nsys", "/r/labkit.nsys-rep", "/r/stats") == [
        "nsys", "stats", "--report", "nvtx_sum,cuda_gpu_kern_sum,nvtx_kern_sum", "--format", "csv",
        "--force-export=true", "-o", "/r/stats", "/r/labkit.nsys-rep"]
    assert nsight.nsys_export_argv("nsys", "/r/a.nsys-rep", "/r/a.sqlite") == [
        "nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "-o", "/r/a.sqlite", "/r/a.nsys-rep"]


def test_child_commands_parse_in_labkit_cli():
    # the flags the profiled child gets are ones `labkit bench` / `labkit sweep` accept
    from labkit.cli import _parser

    a = _parser().parse_args(nsight.bench_argv("add", ["f16x8_pack"], ["4096x4096"], ("cold",), "f16", 0.2,
                                               "/r/labkit.json", axes={"block": [512]})[3:])
    assert a.in_process and not a.kernel_time and a.json == "/r/labkit.json" and a.axis == ["block=512"]
    a = _parser().parse_args(nsight.sweep_argv("seed000", "/r/labkit.jsonl", kernel_time=True)[3:])
    assert a.in_process and a.kernel_time and a.out == "/r/labkit.jsonl"


def test_ncu_command():
    assert nsight.nvtx_path("add", "f16x8_pack", "4096x4096", mode=None) == "labkit@add f16x8_pack 4096x4096/"
    assert nsight.nvtx_path("add", "torch", "4096x4096", "f16", "hot") == \
        "labkit@bench add/add/add torch f16 4096x4096/timed hot/"
    argv = nsight.ncu_argv("ncu", "add", "f16x8_pack", "4096x4096", ["py", "app"])
    assert argv == ["ncu", "--nvtx", "--nvtx-include", "labkit@bench add/add/add f16x8_pack 4096x4096/timed cold/",
                    "-k", "regex:add_kernel", "--clock-control", "none", "--metrics",
                    "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
                    "dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread",
                    "--print-units", "base", "--csv", "--launch-count", "1", "py", "app"]
    # a row op's launcher picks its kernel by row length: every one it may run passes the filter
    r = nsight.ncu_argv("ncu", "softmax_rows", "f16x8", "4096x16384", ["py"])
    assert r[r.index("-k") + 1] == "regex:softmax_rows_reg|softmax_rows_smem|softmax_rows_online"
    r = nsight.ncu_argv("ncu", "rms_norm", "f32", "7x1000", ["py"])  # the scalar kernel is listed once
    assert r[r.index("-k") + 1] == "regex:norm_rows_stream|norm_rows_smem"
    t = nsight.ncu_argv("ncu", "add", "torch", "4096x4096", ["py"], dtype="f16")
    assert "-k" not in t and t[t.index("--launch-skip") + 1] == "1"  # the kernel after the cold flush
    # a record's variant at tuning-axis values names its config range as the runner does
    assert nsight.nvtx_path("add", "f16x8_pack[block=512]", "4096x4096") == \
        "labkit@bench add/add/add f16x8_pack[block=512] 4096x4096/timed cold/"
    assert nsight.nvtx_path("add", "f16x8_pack[block=256]", "4096x4096", mode=None) == \
        "labkit@add f16x8_pack 4096x4096/"  # 256 is the default block: no axis in the name
    with pytest.raises(ConfigError, match="axis block=100 is not offered"):
        nsight.nvtx_path("add", "f16x8_pack[block=100]", "4096x4096")


# ------------------------------------------------------------------------ tool discovery
def _exe(path: Path, body: str = "exit 0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """No nsys / ncu anywhere: empty PATH (but sh), no env override, search globs under tmp."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("LABKIT_NSYS", raising=False)
    monkeypatch.delenv("LABKIT_NCU", raising=False)
    monkeypatch.setattr(tools, "SEARCH_GLOBS", (str(tmp_path / "opt/nsight-compute/*/host/target-linux-x64/{name}"),
                                                 str(tmp_path / "opt/nsight-compute/*/{name}")))
    return tmp_path


def test_find_nsys_inside_nsight_compute(no_tools):
    old = _exe(no_tools / "opt/nsight-compute/2024.1.0/host/target-linux-x64/nsys")
    new = _exe(no_tools / "opt/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
    (no_tools / "opt/nsight-compute/2026.1.0/host/target-linux-x64").mkdir(parents=True)
    (no_tools / "opt/nsight-compute/2026.1.0/host/target-linux-x64/nsys").write_text("not executable")
    assert nsight.find_tool("nsys") == str(new) != str(old)
    ncu = _exe(no_tools / "opt/nsight-compute/2025.3.1/ncu")
    assert nsight.find_tool("ncu") == str(ncu)


def test_find_tool_precedence(no_tools, monkeypatch):
    found = _exe(no_tools / "opt/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
    on_path = _exe(no_tools / "bin/nsys")
    monkeypatch.setenv("PATH", str(no_tools / "bin"))
    assert nsight.find_tool("nsys") == str(on_path)
    given = _exe(no_tools / "mine/nsys")
    monkeypatch.setenv("LABKIT_NSYS", str(found))
    assert nsight.find_tool("nsys") == str(found)                   # $LABKIT_NSYS over PATH
    assert nsight.find_tool("nsys", no_tools / "mine") == str(given)  # a folder given by the user
    assert nsight.find_tool("nsys", given) == str(given)
    with pytest.raises(ToolMissingError, match="not found at /nowhere/nsys"):
        nsight.find_tool("nsys", "/nowhere/nsys")


def test_missing_tools_say_what_to_run(no_tools):
    with pytest.raises(ToolMissingError) as e:
        nsight.find_tool("ncu")
    assert "Nsight Compute" in str(e.value) and "nsight-compute/*/ncu" in str(e.value)
    with pytest.raises(ToolMissingError) as e:
        nsight.profile("add", ["f16x8", "f16x8_pack"], ["4096x4096"], ("cold", "hot"))
    msg = str(e.value)
    assert "nsys (Nsight Systems) not found" in msg and "host/target-linux-x64/nsys" in msg
    assert ("nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node "
            "--force-overwrite=true -o labkit-nsys/labkit python -m labkit.cli bench add --in-process "
            "-v f16x8,f16x8_pack -s 4096x4096 --mode cold hot --budget 0.2 --json labkit-nsys/labkit.json "
            "--no-kernel-time") in msg
    with pytest.raises(ToolMissingError) as e:
        nsight.ncu_metrics("add", "f16x8_pack", "4096x4096")
    assert "ncu --nvtx --nvtx-include 'labkit@bench add/add/add f16x8_pack 4096x4096/timed cold/' " \
           "-k regex:add_kernel --clock-control none" in str(e.value)


def test_cli_profile_without_nsys(no_tools, capsys):
    assert main(["profile", "add", "-v", "f16x8_pack", "-s", "4096x4096"]) == 2
    err = capsys.readouterr().err
    assert "labkit: error: nsys (Nsight Systems) not found" in err and "nsys profile --trace=cuda,nvtx" in err


# ------------------------------------------------------------- fake ncu: errors and parsing
def test_ncu_metrics_with_fake_ncu(tmp_path):
    ncu = _exe(tmp_path / "ncu", f"cat '{DATA / 'ncu_f16x8_pack_timed_fullpath.csv'}'")
    df = nsight.ncu_metrics("add", "f16x8_pack", "4096x4096", ncu=str(ncu), out=tmp_path / "ncu.txt")
    row = df[df["kernel"] == "add_kernel<__half, 8, 16>"].iloc[0]
    assert row["variant"] == "f16x8_pack" and row["model_bytes"] == 100_663_296 and row["registers"] == 22
    assert (tmp_path / "ncu.txt").exists()
    t = nsight.ncu_table([df[df["kernel"].str.startswith("add_kernel")]])
    assert t.iloc[0]["DRAM read MB"] == pytest.approx(67.11424)


def test_cli_profile_ncu_with_fake_ncu(tmp_path, capsys):
    ncu = _exe(tmp_path / "ncu", f"cat '{DATA / 'ncu_f16x8_pack_timed_fullpath.csv'}'")
    assert main(["profile", "add", "-v", "f16x8_pack", "-s", "4096x4096", "--ncu", "--ncu-path", str(ncu),
                 "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert "add_kernel<__half, 8, 16>" in out and "Under ncu" in out


def test_ncu_metrics_of_a_variant_at_axis_values(tmp_path):
    args = tmp_path / "args.json"
    save_args = f"import json, sys; json.dump(sys.argv[1:], open('{args}', 'w'))"
    ncu = _exe(tmp_path / "ncu", f"{PY} -c \"{save_args}\" \"$@\"; cat '{DATA / 'ncu_f16x8_pack_timed_fullpath.csv'}'")
    df = nsight.ncu_metrics("add", "f16x8_pack[block=512]", "4096x4096", ncu=str(ncu))
    assert set(df["variant"]) == {"f16x8_pack[block=512]"} and set(df["model_bytes"]) == {100_663_296}
    argv = json.loads(args.read_text())
    nvtx = argv[argv.index("--nvtx-include") + 1]
    assert nvtx == "labkit@bench add/add/add f16x8_pack[block=512] 4096x4096/timed cold/"
    assert argv[argv.index("--axis") + 1] == "block=512" and "--no-kernel-time" in argv


def test_ncu_nothing_profiled(tmp_path):
    ncu = _exe(tmp_path / "ncu", f"cat '{DATA / 'ncu_no_match.txt'}'")
    with pytest.raises(LabkitError, match="no kernel matched the NVTX / kernel filter") as e:
        nsight.ncu_metrics("add", "f16x8_pack", "4096x4096", ncu=str(ncu))
    assert "The command was:" in str(e.value) and "--nvtx-include" in str(e.value)


def test_ncu_without_counter_permission(tmp_path):
    ncu = _exe(tmp_path / "ncu", 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access '
                                 'NVIDIA GPU Performance Counters on the target device 0."; exit 1')
    with pytest.raises(LabkitError, match="ERR_NVGPUCTRPERM") as e:
        nsight.ncu_metrics("add", "f16x8", "4096x4096", ncu=str(ncu))
    assert "NVreg_RestrictProfilingToAdminUsers=0" in str(e.value) and "ncu --nvtx" not in str(e.value)[:40]
    assert f"{ncu} --nvtx --nvtx-include" in str(e.value)


def test_timeout_never_hangs(tmp_path):
    ncu = _exe(tmp_path / "ncu", "sleep 30")
    t = time.monotonic()
    with pytest.raises(LabkitError, match="did not finish in 1 s") as e:
        nsight.ncu_metrics("add", "f16x8", "4096x4096", ncu=str(ncu), timeout=1)
    assert time.monotonic() - t < 10 and "--clock-control none" in str(e.value)


@pytest.mark.skipif(not __import__("shutil").which("setsid"), reason="needs setsid (util-linux)")
def test_timeout_with_a_grandchild_holding_the_pipes(tmp_path, monkeypatch):
    # a process that left the tool's process group survives the kill and keeps stdout open:
    # reading the pipes to their end would wait for it
    monkeypatch.setattr(toolkit, "KILL_GRACE_S", 0.5)
    pid = tmp_path / "pid"
    tool = _exe(tmp_path / "tool", f"setsid sleep 60 & echo $! > '{pid}'; sleep 60")
    t = time.monotonic()
    try:
        with pytest.raises(LabkitError, match="tool did not finish in 1 s"):
            tools.run_tool([tool], 1, "tool")
        assert time.monotonic() - t < 10
    finally:
        os.kill(int(pid.read_text()), signal.SIGKILL)


# --------------------------------------------------- synthetic SQLite export + fake nsys
PID, TID, OTHER = 100, 100, 101
GTID, GTID2, GPID = (PID << 24) | TID, (PID << 24) | OTHER, PID << 24


class FakeTrace:
    """Writes an nsys-like SQLite export of a small labkit bench: NVTX push/pop ranges (labkit and
    CCCL domains; text and textId), runtime API calls and the kernels they launched."""

    def __init__(self):
        self.strings, self.nvtx, self.api, self.kern = {}, [], [], []
        self.t, self.corr = 1000, 0
        self.nvtx += [(0, None, 75, "labkit", None, GTID, 1), (0, None, 75, "CCCL", None, GTID, 2)]

    def sid(self, s):
        return self.strings.setdefault(s, len(self.strings) + 1)

    def tick(self, dt=100):
        self.t += dt
        return self.t

    def range(self, name, body, domain=1, tid=GTID, inline=False):
        start = self.tick()
        body()
        end = self.tick()
        self.nvtx.append((start, end, 59, name if inline else None, None if inline else self.sid(name), tid, domain))

    def launch(self, name, dur_us, n=1, tid=GTID):
        """One API call launching `n` kernels (n > 1: a CUDA graph replay, one correlationId)."""
        self.corr += 1
        t = self.tick()
        self.api.append((t, t + 5, tid, self.corr))
        for i in range(n):
            g = t + 1000 + i * 100_000
            self.kern.append((g, g + int(dur_us * 1000), self.corr, GPID, self.sid(name)))

    def write(self, path):
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.execute("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, "
                    "textId INTEGER, globalTid INTEGER, domainId INTEGER)")
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER, "
                    "correlationId INTEGER)")
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, correlationId INTEGER, "
                    "globalPid INTEGER, demangledName INTEGER)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?, ?)", self.nvtx)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)", self.api)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?)", self.kern)
        con.commit()
        con.close()
        return path


def fake_run(samples=10, hot_samples=4, batch=8):
    """bench add as Runner.run and timing.measure run it: f16x8_pack 4096x4096 cold (nsys 24.0-25.8
    µs), the same at block=512 (23 µs), f16x8 4096x4096 cold (26 µs), torch f16 1024x1024 hot (graph
    of `batch` kernels, 2.0 µs). Returns (trace, records of the run under nsys: no kernel_us)."""
    tr = FakeTrace()

    def config(kernel, durs, mode, n_hot=0):
        def warmup():
            if mode == "cold":  # a cold warm-up opens with one L2 flush
                tr.launch(FLUSH, 35.0)
            for d in durs[:3]:
                tr.launch(kernel, d)

        def timed():  # groups of samples behind the blocking kernel
            tr.launch(BLOCK, 5.0)
            if mode == "cold":
                for d in durs:
                    tr.launch(FLUSH, 35.0)
                    tr.launch(kernel, d)
            else:
                for _ in range(5):  # timing.estimate's calls, then the graph's replays
                    tr.launch(kernel, durs[0])
                tr.launch(BLOCK, 5.0)
                for _ in range(n_hot):
                    tr.launch(kernel, durs[0], n=batch)

        def body():
            tr.range("compile", lambda: None)
            tr.launch(FILL, 3.0)  # the inputs, made before the check range opens
            tr.range("check", lambda: [tr.launch(FILL, 3.0), tr.launch(kernel, 30.0), tr.launch(REF, 50.0),
                                       tr.range("cub::DeviceReduce::Sum", lambda: tr.launch(FLUSH, 1.0), domain=2)])
            tr.range("warmup", warmup)
            tr.range(f"timed {mode}", timed)
            tr.range("recheck", lambda: tr.launch(REF, 50.0))
        return body

    pack = [24.0 + 0.2 * (i % 10) for i in range(samples)]  # median 24.9
    tr.range("bench add", lambda: tr.range("add", lambda: [
        tr.range("add f16x8_pack 4096x4096", config(ADD_PACK, pack, "cold")),
        tr.range("add f16x8_pack[block=512] 4096x4096", config(ADD_PACK, [23.0] * samples, "cold")),
        tr.range("add f16x8 4096x4096", config(ADD_X8, [26.0] * samples, "cold"), inline=True),
        tr.launch(ADD_X8, 99.0, tid=GTID2),  # another thread, inside the ranges' time: not theirs
        tr.range("add torch f16 1024x1024", config(TORCH_ADD, [2.0] * 3, "hot", hot_samples)),
    ]))
    base = {"op": "add", "dtype": "f16", "status": "ok", "gpu": "NVIDIA H200", "driver": "580.159.04",
            "commit": "1234567", "date": "2026-11-22T00:00:00Z"}
    records = [dict(base, variant="f16x8_pack", shape="4096x4096", mode="cold", time_us=25.4, samples=samples,
                    batch=1, block=256),
               dict(base, variant="f16x8_pack[block=512]", shape="4096x4096", mode="cold", time_us=23.5,
                    samples=samples, batch=1, block=512),
               dict(base, variant="f16x8", shape="4096x4096", mode="cold", time_us=28.5, samples=samples, batch=1),
               dict(base, variant="torch", shape="1024x1024", mode="hot", time_us=2.6, samples=hot_samples,
                    batch=batch),
               dict(base, variant="f16x8", shape="1024x1024", mode="cold", status="failed", error="mismatch"),
               dict(base, variant="f16x8", shape="2^40", mode="cold", status="skipped", error="needs 6 TiB")]
    return tr, records


def test_sqlite_attribution(tmp_path):
    tr, _ = fake_run()
    ranges, launches = nsight.read_sqlite(tr.write(tmp_path / "x.sqlite"))
    assert "cub::DeviceReduce::Sum" not in set(ranges["name"])  # CCCL domain left out
    assert {"add f16x8 4096x4096", "timed cold", "timed hot", "recheck"} <= set(ranges["name"])  # inline text, textId
    other = launches[launches["globalTid"] == GTID2]
    assert len(other) == 1 and other["config"].isna().all()
    k = nsight.launch_kernels(launches)
    own = k[k["variant_kernel"]].set_index(["variant", "phase"])
    assert own.loc[("f16x8_pack", "timed"), "launches"] == 10 and own.loc[("f16x8_pack", "check"), "launches"] == 1
    assert own.loc[("f16x8_pack", "warmup"), "launches"] == 3
    assert own.loc[("f16x8_pack", "timed"), "median_us"] == pytest.approx(24.9)
    assert own.loc[("torch", "timed"), "launches"] == 5 + 4 * 8 and own.loc[("torch", "timed"), "mode"] == "hot"
    assert own.loc[("f16x8_pack", "check"), "mode"] == "cold"  # the config's mode, on every phase
    assert own.loc[("f16x8_pack[block=512]", "timed"), "median_us"] == pytest.approx(23.0)
    # the flush (in the cold warm-up too), the blocking kernel, the inputs and the references are not
    # the variants' own kernels, though they run in the configs' ranges
    flush = k[k["short"] == "reduce_kernel"]
    assert not flush["variant_kernel"].any()
    assert flush.groupby("phase")["launches"].sum().to_dict() == {"check": 4, "timed": 30, "warmup": 3}
    assert not k.loc[k["short"] == "lk_block_kernel", "variant_kernel"].any()
    assert set(k.loc[~k["variant_kernel"], "phase"]) == {"check", "warmup", "timed", "recheck", "other"}
    assert set(k.loc[k["variant"] == "torch", "dtype"]) == {"f16"}
    assert set(k.loc[k["variant"] == "f16x8_pack[block=512]", "dtype"]) == {"f16"}  # from the registry


def test_cross_check_pass_and_miss(tmp_path):
    tr, records = fake_run()
    _, launches = nsight.read_sqlite(tr.write(tmp_path / "x.sqlite"))
    c = nsight.cross_check(records, nsight.launch_kernels(launches)).set_index("variant")
    assert len(c) == 4  # the failed and the skipped record have no time
    assert c.loc["f16x8_pack", "nsys_us"] == pytest.approx(24.9) and c.loc["f16x8_pack", "result"] == "pass"
    assert c.loc["f16x8_pack", "diff_pct"] == pytest.approx(100 * 0.5 / 24.9)
    assert c.loc["f16x8_pack[block=512]", "nsys_us"] == pytest.approx(23.0)
    assert c.loc["f16x8", "result"] == "MISS" and c.loc["f16x8", "goal"] == "<= 3 %"  # 28.5 vs 26: +9.6 %
    assert c.loc["torch", "goal"] == "<= 1 µs" and c.loc["torch", "result"] == "pass"
    assert c.loc["torch", "nsys_launches"] == 37 and c.loc["torch", "scope"] == "timed hot"
    assert c["pass"].tolist() == [True, True, False, True]
    fig = nsight.check_plot(c.reset_index())
    assert {t.name for t in fig.data} == {"pass", "MISS", "equal"}
    # nothing timed (every row failed or skipped): an empty table, not an error
    assert nsight.cross_check(records[4:], nsight.launch_kernels(launches)).empty


FAKE_NSYS = """#!{py}
import shutil, sys, time
from pathlib import Path
a = sys.argv[1:]
if a[0] == {hang!r}:
    time.sleep(120)
if a[0] == "profile":
    out = Path(a[a.index("-o") + 1])
    shutil.copy({records!r}, a[a.index("--json") + 1])
    out.with_suffix(".nsys-rep").write_text("fake")
    print("Generated:", out.with_suffix(".nsys-rep"))
elif a[0] == "stats" and {db!r}:
    prefix, rep = Path(a[a.index("-o") + 1]), Path(a[-1])
    shutil.copy({nvtx_sum!r}, str(prefix) + "_nvtx_sum.csv")
    shutil.copy({db!r}, rep.with_suffix(".sqlite"))
"""


def _fake_nsys(tmp_path, records, db=None, hang=""):
    """An nsys whose `profile` writes a report and the records `labkit bench --json` would, and whose
    `stats` writes nvtx_sum and the SQLite export `db` (none without it); `hang` sleeps 120 s."""
    rec = tmp_path / "fake.json"
    rec.write_text(json.dumps(records))
    nsys = _exe(tmp_path / "bin" / "nsys")
    nsys.write_text(FAKE_NSYS.format(py=PY, records=str(rec), nvtx_sum=str(DATA / "stats_nvtx_sum.csv"),
                                     db=str(db) if db else None, hang=hang))
    return nsys


def test_profile_end_to_end_with_fake_nsys(tmp_path):
    tr, records = fake_run()
    nsys = _fake_nsys(tmp_path, records, tr.write(tmp_path / "fake.sqlite"))
    run = tmp_path / "run"
    p = nsight.profile("add", ["f16x8_pack", "f16x8", "torch"], ["4096x4096"], ("cold",), out_dir=run, nsys=str(nsys))
    assert p.report == run / "labkit.nsys-rep" and p.source == "live"
    assert len(p.commands) == 3 and p.commands[0].startswith(f"{nsys} profile --trace=cuda,nvtx")
    assert p.commands[0].endswith(f"--json {run / 'labkit.json'} --no-kernel-time")  # CUPTI is nsys's
    assert p.commands[1].endswith(f"-o {run / 'stats'} {run / 'labkit.nsys-rep'}")
    # labkit's CUPTI kernel durations come from a second run without nsys, with the default kernel
    # time (here: no GPU, so it fails and says so)
    assert p.commands[2].endswith(f"--json {run / 'labkit-kernel-time.json'}") and "nsys" not in p.commands[2]
    assert "the kernel-time run (without nsys) exited with status 2" in p.meta["note"]
    assert list(p.check["result"]) == ["pass", "pass", "MISS", "pass"] and p.meta["gpu"] == "NVIDIA H200"
    assert p.ranges.set_index("range").loc["add f16x8_pack 4096x4096", "instances"] == 2  # from stats_nvtx_sum.csv
    # the summary saved for recorded mode reads back the same
    saved = p.save(tmp_path / "summary")
    assert not list(saved.glob("*.jsonl"))  # recorded.load must not mistake it for a sweep
    back = nsight.recorded_profile(saved)
    assert back.source.startswith("recorded") and list(back.check["result"]) == ["pass", "pass", "MISS", "pass"]
    assert back.meta["gpu"] == "NVIDIA H200" and back.commands == p.commands
    assert back.records["commit"].iloc[0] == "1234567"  # a commit of digits stays a string


def test_load_profile_takes_kernel_time_from_the_run_without_nsys(tmp_path):
    tr, records = fake_run()
    tr.write(tmp_path / "labkit.sqlite")
    (tmp_path / "labkit.json").write_text(json.dumps(records))
    again = [dict(r, time_us=(r.get("time_us") or 0) - 2, kernel_us=k, kernel_gbps=4000.0, overhead_us=2.0)
             for r, k in zip(records[:4], [24.8, 23.1, 26.2, 2.1])]
    (tmp_path / "labkit-kernel-time.json").write_text(json.dumps(again))
    p = nsight.load_profile(tmp_path)
    r = p.records.set_index(["variant", "shape"])
    assert r.loc[("f16x8", "4096x4096"), "kernel_us"] == 26.2 and r.loc[("f16x8", "1024x1024"), "kernel_us"] != 26.2
    pack = r.loc[("f16x8_pack", "4096x4096")]
    assert pack["time_us"] == 25.4  # the profiled run's own event time stays
    assert pack["kernel_gbps"] == 4000.0 and "overhead_us" not in r  # not the other run's events
    c = p.check.set_index("variant")
    assert c.loc["f16x8", "labkit_kernel_us"] == 26.2 and c.loc["f16x8", "result"] == "pass"  # kernel vs kernel
    assert c["result"].tolist() == ["pass", "pass", "pass", "pass"]


@pytest.mark.timeout(60)  # unbounded, the fake nsys would sleep 120 s here
@pytest.mark.parametrize("step", ["stats", "export"])
def test_profile_timeout_bounds_stats_and_export(tmp_path, step):
    # the one timeout bounds every tool run: `nsys stats`, and `nsys export` when stats wrote no SQLite
    _, records = fake_run()
    nsys = _fake_nsys(tmp_path, records, hang=step)
    t = time.monotonic()
    with pytest.raises(LabkitError, match=f"nsys {step} did not finish in 2 s") as e:
        nsight.profile("add", ["f16x8"], ["1024x1024"], out_dir=tmp_path / "run", nsys=str(nsys), timeout=2)
    assert time.monotonic() - t < 30
    msg = str(e.value)  # the command to run by hand, on the report that was written
    assert f"{nsys} {step} " in msg and str(tmp_path / "run" / "labkit.nsys-rep") in msg and "--timeout" in msg


def test_profile_checks_its_arguments_before_nsys(tmp_path):
    with pytest.raises(ConfigError, match="has no tuning axis 'threads'"):
        nsight.profile("add", ["f16x8_pack"], axes={"threads": [128]}, nsys=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="no variant 'f16x9'"):
        nsight.profile("add", ["f16x9"], nsys=str(tmp_path / "nowhere"))


def test_profile_report_missing(tmp_path):
    nsys = _exe(tmp_path / "nsys", 'echo "CUDA driver not found" >&2; exit 3')
    with pytest.raises(LabkitError, match="wrote no report \\(exit 3\\)") as e:
        nsight.profile("add", ["f16x8"], ["1024x1024"], out_dir=tmp_path / "run", nsys=str(nsys))
    assert "CUDA driver not found" in str(e.value) and "The command was:" in str(e.value)


def test_recorded_dir_prefers_results(tmp_path, monkeypatch):
    (tmp_path / "nvidia-h100" / "nsight").mkdir(parents=True)
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    assert nsight.recorded_dir() == tmp_path / "nvidia-h100" / "nsight"
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path / "empty"))
    d = nsight.recorded_dir()
    assert d is None or d.parent.parent.name == "results"


def test_recorded_summary_in_results():
    # the summary committed under results/<gpu>/nsight/ (Profile.save) reads back without a GPU
    p = nsight.recorded_profile(profiling.recorded_dir())
    assert len(p.check) and p.check["result"].isin(["pass", "MISS", "—", "pooled"]).all()
    assert {"kernel_us", "time_us"} <= set(p.records.columns) and p.meta["gpu"].startswith("NVIDIA")
