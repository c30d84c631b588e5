"""CPU half: the recording script's stage plan (what a device call runs, in which order)."""
import pytest

from labkit.benchmarks import record


def _plan(*argv):
    ap = record.parser()
    return [t.name for t in record.plan(ap.parse_args(["--logs", "x", *argv]), ap)]


def test_stage_names_are_unique_and_all_run_by_default():
    names = [t.name for t in record.stages(0.25)]
    assert len(names) == len(set(names)) and _plan() == names


def test_only_runs_the_named_stages_in_the_order_named_less_skip():
    assert _plan("--only", "zoo", "build", "tests") == ["zoo", "build", "tests"]
    assert _plan("--only", "zoo", "build", "--skip", "build") == ["zoo"]


def test_an_unknown_stage_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as e:
        _plan("--only", "buidl")
    assert e.value.code == 2 and "unknown stage(s) ['buidl']" in capsys.readouterr().err


def test_the_zoo_stage_runs_every_zoo_sweep_in_one_process():
    from labkit.registry import ops
    from labkit.sweeps import SWEEPS

    cmd = {s.name: s.cmd for s in record.stages(0.1)}["zoo"]
    zoo = record.zoo()  # one sweep per op of the zoo group, derived from the catalog
    assert zoo and set(zoo) <= set(SWEEPS) and cmd[cmd.index("sweep") + 1:][:len(zoo)] == zoo
    assert {SWEEPS[n].op for n in zoo} == {o.name for o in ops().values() if o.group == "zoo"}


def test_a_step_past_its_time_is_interrupted_and_keeps_its_summary():
    import sys
    import time

    from labkit.benchmarks.gpu_tests import run_step, summary

    body = ("import time\nprint('collected', flush=True)\ntry:\n    time.sleep(60)\n"
            "except KeyboardInterrupt:\n    print('==== 3 passed in 1.00s ====')\n")
    t0 = time.monotonic()
    out, rc = run_step([sys.executable, "-c", body], timeout=4, grace=3)
    assert rc == "timeout" and time.monotonic() - t0 < 10
    assert summary(out, "memcheck") == ("3 passed in 1.00s; memcheck: no final summary (interrupted), "
                                       "0 reports", "no final summary")
    out, rc = run_step([sys.executable, "-c", "print('==== 5 passed in 2s ====')"], timeout=30)
    assert rc == 0 and summary(out, "tests") == ("5 passed in 2s", "")
    verbose = "tests/test_serve_gpu.py::test_serve PASSED [100%]\n===== 24 passed in 192.37s (0:03:12) =====\n"
    assert summary(verbose, "timing") == ("24 passed in 192.37s (0:03:12)", "")  # the timing step runs -v


def test_a_step_whose_output_outlives_it_is_not_waited_for():
    """A process that left the step's session keeps the output pipe open after the step has ended (and
    after a SIGKILL of its group): the step's output and exit code come back within the grace."""
    import sys
    import time

    from labkit.benchmarks.gpu_tests import run_step

    body = ("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], "
            "start_new_session=True)\nprint('==== 2 passed in 1s ====', flush=True)\n")
    t0 = time.monotonic()
    out, rc = run_step([sys.executable, "-c", body], timeout=30, grace=2)
    assert rc == 0 and time.monotonic() - t0 < 10
    assert "2 passed in 1s" in out and "still held its output: not waited for" in out


def test_a_sanitizer_step_that_dies_before_any_outcome_ended_at_startup():
    """The start-up failure can also end the step (the H200 racecheck at bba28cd2ea79: SIGSEGV after
    'bringing up nodes...'): run_step says so, and main runs it once more as it does a hang; a step
    that failed after outcomes, or one not watched for start-up, keeps its exit code."""
    import sys

    from labkit.benchmarks import gpu_tests

    died = "import os, signal\nprint('bringing up nodes...', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    out, rc = gpu_tests.run_step([sys.executable, "-c", died], timeout=30, grace=2, startup_s=20)
    assert rc == f"ended at startup (exit -{int(__import__('signal').SIGSEGV)})" and "bringing up nodes" in out
    assert gpu_tests.run_step([sys.executable, "-c", died], timeout=30, grace=2)[1] == -int(__import__("signal").SIGSEGV)
    failed = "import sys\nprint('..F. [100%]', flush=True)\nsys.exit(1)\n"
    assert gpu_tests.run_step([sys.executable, "-c", failed], timeout=30, grace=2, startup_s=20)[1] == 1


@pytest.mark.parametrize("first_try", ["hangs", "dies"])
def test_a_sanitizer_step_whose_workers_never_start_is_stopped_set_aside_and_run_once_more(tmp_path, monkeypatch,
                                                                                           first_try):
    """The xdist workers under compute-sanitizer at times never start ('bringing up nodes...', then
    nothing until the step's limit, or the step dies): such a try is stopped after STARTUP_S (or has
    ended), its logs set aside, and the step runs again; a step whose tests report outcomes is left alone."""
    import json
    import os
    import sys
    import time

    from labkit.benchmarks import gpu_tests

    started = ("import time\nprint('bringing up nodes...', flush=True); time.sleep(1.5)\n"
               "print('..s.', end='', flush=True); time.sleep(1)\nprint('. [100%]')\nprint('==== 5 passed in 2s ====')\n")
    out, rc = gpu_tests.run_step([sys.executable, "-c", started], timeout=30, grace=3, startup_s=3)
    assert rc == 0 and out.endswith("5 passed in 2s ====\n")  # its first outcome came after 1.5 s, within 3: not stopped

    # a stand-in compute-sanitizer: the first try hangs at startup, the second passes
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "compute-sanitizer").write_text(
        f"#!{sys.executable}\nimport os, sys, time\nd = sys.argv[-1]\nfirst = not os.path.exists(d + '/tried')\n"
        "open(d + '/tried', 'a').close()\nopen(d + f'/sanitizer-memcheck.{os.getpid()}.log', 'w').write("
        "'========= COMPUTE-SANITIZER\\n' + ('' if first else '========= ERROR SUMMARY: 0 errors\\n'))\n"
        "print('bringing up nodes...', flush=True)\nif first:\n    try:\n        time.sleep(60)\n"
        "    except KeyboardInterrupt:\n        print('no tests ran in 1.00s'); sys.exit(2)\n"
        "print('....')\nprint('==== 4 passed in 1s ====')\n")
    if first_try == "dies":  # as the H200 racecheck at bba28cd2ea79: SIGSEGV before any outcome
        src = (bin_ / "compute-sanitizer").read_text()
        (bin_ / "compute-sanitizer").write_text(src.replace("time.sleep(60)", "os.kill(os.getpid(), 11)"))
    (bin_ / "compute-sanitizer").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(gpu_tests.STEPS, "memcheck", ["compute-sanitizer", "-n", "4", "{logs}"])
    monkeypatch.setattr(gpu_tests, "STARTUP_S", 1)
    monkeypatch.setattr(gpu_tests.device, "properties", lambda: {"slug": "g"})
    monkeypatch.setattr(gpu_tests.device, "provenance", lambda: {"gpu": "G", "commit": "c", "date": "d"})
    monkeypatch.setattr(gpu_tests, "results_dir", lambda: tmp_path / "res")
    logs = tmp_path / "logs"
    t0 = time.monotonic()
    res = gpu_tests.main(["--logs", str(logs), "--steps", "memcheck", "--budget-s", "120"])
    (run,) = res["runs"]
    assert time.monotonic() - t0 < 30 and run["returncode"] == 0
    first = ("showed no test's outcome in 1 s and was stopped" if first_try == "hangs"
             else "ended before any test's outcome (exit -11)")
    assert run["summary"] == ("4 passed in 1s; memcheck: 0 errors in the final summary, 0 reports; a first try "
                              f"{first} (its logs in hung/), this is the second")
    assert ("no tests ran" if first_try == "hangs" else "bringing up") in (logs / "hung" / "pytest-memcheck.log").read_text()
    assert len(list((logs / "hung").glob("sanitizer-memcheck.*.log"))) == 1  # the first try's, apart
    assert json.loads((tmp_path / "res" / "g" / "tests.json").read_text())["runs"][0]["summary"] == run["summary"]
    assert "this_call" not in json.loads((tmp_path / "res" / "g" / "tests.json").read_text())
    assert gpu_tests.exit_status(res) == 0
    for rc in ("timeout", "hung at startup", 1, None, "sanitizer: 2 errors"):  # interrupted, failed, not run
        assert gpu_tests.exit_status({"this_call": [run, dict(run, returncode=rc)]}) == 1
    assert gpu_tests.exit_status({"runs": [dict(run, returncode=1)]}) == 0  # --merge: nothing ran


def test_tests_json_keeps_per_step_the_newest_run_and_the_newest_pass():
    from labkit.benchmarks.gpu_tests import merge

    def f(date, commit, *runs):
        return {"gpu": "G", "date": date, "commit": commit,
                "runs": [{"step": s, "summary": s, "returncode": rc} for s, rc in runs]}

    m = merge([f("2026-11-01", "a", ("timing", 0), ("memcheck", 0)),
               f("2026-11-02", "b", ("tests", 1)),
               f("2026-11-03", "c", ("tests", 0), ("memcheck", "timeout"))])
    got = [(r["step"], r["commit"], r["returncode"]) for r in m["runs"]]
    assert got == [("timing", "a", 0), ("tests", "c", 0), ("memcheck", "a", 0), ("memcheck", "c", "timeout")]
    assert m["commit"] == "c" and m["date"] == "2026-11-03"


# the report formats of compute-sanitizer 2025.3 (CUDA 13.0), as written to its --log-file
RACE = ("========= Error: Race reported between Write access at labkit_canary_race(const float *, const float *, "
        "float *, long)+0x90 in canary_race.cu:5\n"
        "=========     and Read access at labkit_canary_race(const float *, const float *, float *, long)+0x120 "
        "in canary_race.cu:6 [992 hazards]\n")
OTHER_RACE = RACE.replace("labkit_canary_race", "softmax_rows_smem")
OOB = ("========= Invalid __global__ write of size 4 bytes\n"
       "=========     at add_kernel(const float *, const float *, float *, long)+0x1f0 in add.cu:40\n"
       "=========     by thread (0,0,0) in block (0,0,0)\n=========     Address 0x7f0000000000 is out of bounds\n"
       "=========\n========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" "
       "on CUDA API call to cudaStreamSynchronize.\n")


def _log(body: str, final: str) -> str:
    return f"========= COMPUTE-SANITIZER\n{body}========= {final}\n"


@pytest.mark.parametrize("step, reports, wrong", [
    ("racecheck", [_log(RACE, "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)")], ""),
    ("racecheck", [_log("", "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")],
     "the planted race was not reported: the sanitizer did not watch the test processes"),
    ("racecheck", [_log(RACE + OTHER_RACE, "RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)")],
     "1 reports"),
    ("racecheck", [RACE], "no final summary"),  # interrupted: what it reported still counts
    ("memcheck", [_log("", "ERROR SUMMARY: 0 errors")], ""),
    ("memcheck", [_log("", "ERROR SUMMARY: 0 errors"), _log(OOB, "ERROR SUMMARY: 2 errors")], "1 reports"),  # per file
])
def test_a_sanitizer_step_passes_only_on_no_report_but_the_planted_race(step, reports, wrong):
    from labkit.benchmarks.gpu_tests import summary

    line, got = summary("100 passed in 9s", step, reports)
    assert got == wrong and line.startswith(f"100 passed in 9s; {step}: ")
    if reports == [RACE]:
        assert line.endswith("no final summary (interrupted), 0 reports outside the planted race, 1 in it")


def test_the_planted_race_is_in_the_racecheck_step():
    from labkit.benchmarks.gpu_tests import CANARY_FILE, STEPS

    argv = STEPS["racecheck"]
    assert CANARY_FILE in argv and "test_sanitizer_canary_race" in argv[argv.index("-k") + 1]
    assert all(CANARY_FILE not in STEPS[s] for s in ("timing", "tests", "memcheck"))


def test_gpu_tests_refuses_merging_two_gpus_and_a_run_without_logs(tmp_path, capsys):
    import json

    from labkit.benchmarks import gpu_tests

    files = []
    for k, gpu in enumerate(("NVIDIA H100 80GB HBM3", "NVIDIA H200")):
        files.append(tmp_path / f"t{k}.json")
        files[-1].write_text(json.dumps({"gpu": gpu, "date": "2026-11-23", "commit": "c", "runs": []}))
    with pytest.raises(SystemExit) as e:
        gpu_tests.main(["--merge", *map(str, files), "--out", str(tmp_path / "m.json")])
    assert e.value.code == 2 and "--merge takes the files of one GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        gpu_tests.main([])
    assert e.value.code == 2 and "--logs is required" in capsys.readouterr().err


def test_cell_seconds_reads_nbclient_timestamps():
    """The live lab's slow cells come from the execution timestamps nbclient writes per cell."""
    import nbformat

    from labkit.benchmarks.explorer_latency import cell_seconds

    def cell(src, start, end):
        c = nbformat.v4.new_code_cell(src)
        c.metadata["execution"] = {"iopub.execute_input": start, "shell.execute_reply": end}
        return c

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# lab"),
                cell("tune = labs.rows(...)\nmore", "2026-11-23T21:00:00.000Z", "2026-11-23T21:00:42.250Z"),
                cell("x = 1", "2026-11-23T21:00:42.300Z", "2026-11-23T21:00:42.310Z"),
                nbformat.v4.new_code_cell("never ran")]
    assert cell_seconds(nb) == [[1, 42.2, "tune = labs.rows(...)"]]
    assert [r[0] for r in cell_seconds(nb, least_s=0)] == [1, 2]


def test_every_op_has_a_sweep_of_its_own_by_its_group():
    """Op.group decides sweep membership: a zoo op's sweep is made from it (named after it), a seed
    op's is declared by name in labkit.sweeps (seed000, access-width, copy-gs)."""
    from labkit.registry import ops
    from labkit.sweeps import SWEEPS, zoo_sweeps

    own = {s.op for s in SWEEPS.values() if not s.name.startswith("tune-")}
    assert own == set(ops())
    assert {s.op for s in zoo_sweeps()} == {o.name for o in ops().values() if o.group == "zoo"}


def test_a_step_runs_in_parts_each_kept_apart():
    """--workers sets pytest-xdist's processes, --select narrows a step's -k (a sanitizer step too long
    for one call); merge keeps each part's newest run beside the whole step's."""
    from labkit.benchmarks.gpu_tests import command, merge

    argv = command("memcheck", 4, "sgemm or softmax")
    assert argv[argv.index("-n") + 1] == "4"
    assert argv[argv.index("-k") + 1] == "(test_variant_matches or misaligned or bad) and (sgemm or softmax)"
    assert command("timing", 4, "reconcile")[-2:] == ["-k", "reconcile"] and "-n" not in command("timing")
    race = command("racecheck", None, "softmax")  # every part of racecheck keeps its planted race
    assert race[race.index("-k") + 1].endswith(") and (softmax)) or test_sanitizer_canary_race")
    assert command("tests") == __import__("labkit.benchmarks.gpu_tests", fromlist=["STEPS"]).STEPS["tests"]

    def f(date, *runs):
        return {"gpu": "G", "date": date, "commit": date[-2:],
                "runs": [dict({"step": s, "summary": s, "returncode": rc}, **({"select": k} if k else {}))
                         for s, k, rc in runs]}

    m = merge([f("2026-11-01", ("memcheck", None, 0)), f("2026-11-02", ("memcheck", "a", 0)),
               f("2026-11-03", ("memcheck", "not a", "timeout"), ("memcheck", "a", 0))])
    got = [(r["step"], r.get("select"), r["commit"], r["returncode"]) for r in m["runs"]]
    assert got == [("memcheck", None, "01", 0), ("memcheck", "a", "03", 0), ("memcheck", "not a", "03", "timeout")]
    # a whole run that passed covers the older parts of its step; a failed one does not
    m = merge([f("2026-11-01", ("memcheck", "a", "timeout"), ("racecheck", "a", 0)),
               f("2026-11-02", ("memcheck", None, 0), ("racecheck", None, 1))])
    got = [(r["step"], r.get("select"), r["commit"], r["returncode"]) for r in m["runs"]]
    assert got == [("memcheck", None, "02", 0), ("racecheck", "a", "01", 0), ("racecheck", None, "02", 1)]


def test_gpu_tests_that_start_workers_are_marked_and_left_out_of_the_sanitizers():
    """A GPU test whose labkit.bench runs in worker processes (the default) carries the `workers` marker,
    and both sanitizer steps deselect it: a worker's start under the sanitizer takes minutes, and the
    memcheck set stalled once such a test was in it."""
    import ast
    from pathlib import Path

    from labkit.benchmarks.gpu_tests import STEPS

    def marked(fn, module_marks):
        decos = [ast.unparse(d) for d in fn.decorator_list]
        return "pytest.mark.workers" in decos or "pytest.mark.workers" in module_marks

    unmarked = []
    for f in sorted(Path(__file__).parent.glob("test_*_gpu.py")):
        tree = ast.parse(f.read_text())
        module_marks = " ".join(ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign)
                                and any(getattr(t, "id", "") == "pytestmark" for t in n.targets))
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")):
            for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call) and ast.unparse(c.func) == "labkit.bench"):
                in_process = any(k.arg == "workers" and isinstance(k.value, ast.Constant) and k.value.value is False
                                 for k in call.keywords)
                if not in_process and not marked(fn, module_marks):
                    unmarked.append(f"{f.name}::{fn.name}")
    assert not unmarked, unmarked
    for step in ("memcheck", "racecheck"):
        m = STEPS[step][STEPS[step].index("-m", STEPS[step].index("pytest")) + 1]
        assert "not workers" in m, (step, m)


def test_racecheck_leaves_out_the_large_cases_and_only_those():
    """Cases moving more than LARGE_BYTES carry the marker `large` (sgemm's 8400001x4x4 ran past racecheck's
    limit on an H200), racecheck deselects it and nothing else runs without them."""
    import test_gpu

    from labkit.benchmarks.gpu_tests import STEPS

    want = {f"{op.name}-{v.name}-{v.dtype}-{op.format_shape(s)}" for op, v, s in test_gpu.CASES
            if not v.is_torch and op.cost.bytes_moved(s, v.dtype) > test_gpu.LARGE_BYTES}
    ids = dict(zip(map(id, test_gpu._PARAMS), test_gpu._ids(test_gpu.CASES)))
    large = {ids[id(p)] for p in test_gpu._PARAMS if any(m.name == "large" for m in p.marks)}
    assert large == want and "sgemm-tiled32-f32-8400001x4x4" in large
    marks = {s: STEPS[s][STEPS[s].index("-m", STEPS[s].index("pytest")) + 1] for s in STEPS}
    assert [s for s, m in marks.items() if "not large" in m] == ["racecheck"]


def test_gpu_tests_refuse_fewer_than_one_worker(capsys, tmp_path):
    from labkit.benchmarks import gpu_tests

    with pytest.raises(SystemExit) as e:
        gpu_tests.main(["--logs", str(tmp_path), "--workers", "0"])
    assert e.value.code == 2 and "--workers takes the pytest-xdist processes, at least 1, got 0" in capsys.readouterr().err


def test_transcript_keeps_a_labs_text_and_drops_its_figures():
    """What a live lab showed is committed as text: streams, plain results and errors in cell order,
    without the HTML, plotly figures and widgets that make a run notebook megabytes."""
    import nbformat

    from labkit.benchmarks.explorer_latency import transcript

    out = nbformat.v4.new_output
    c1 = nbformat.v4.new_code_cell("print('hi')")
    c1.outputs = [out("stream", name="stdout", text="LIVE: measuring\n"),
                  out("display_data", data={"text/html": "<div>plot</div>", "text/plain": "Figure({...})"})]
    c2 = nbformat.v4.new_code_cell("table")
    c2.outputs = [out("execute_result", data={"text/plain": "  op  time_us\nadd  31.4"}, execution_count=1),
                  out("display_data", data={"text/plain": "VBox(children=(HTML(value='<b>Live</b>'),))"})]
    c3 = nbformat.v4.new_code_cell("1/0")
    c3.outputs = [out("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# lab"), c1, c2, c3]
    assert transcript(nb) == ("[1] LIVE: measuring\n[2]   op  time_us\nadd  31.4\n"
                              "[3] ZeroDivisionError: division by zero\n")


def test_a_transcript_folder_that_cannot_be_made_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    """--executed naming a file stops at once with the flag in the message (no GPU needed: the check
    comes before the latency run and the labs, so no measured lab is lost to it)."""
    from labkit.benchmarks import explorer_latency

    monkeypatch.setattr(explorer_latency, "latency", lambda: pytest.fail("ran before the folder was checked"))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as e:
        explorer_latency.main(["--executed", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"--executed {blocker / 'sub'}: not a folder the transcripts can be written to" in err


def _rows_file(path, commits):
    import json

    path.write_text("".join(json.dumps({"op": "add", "variant": "f16", "dtype": "f16", "shape": f"{i}x1", "mode": "cold",
                                        "status": "ok", "commit": c}) + "\n" for i, c in enumerate(commits)))
    return path


def test_a_sweep_stage_names_the_files_it_appends_to_and_sweeps_them():
    """Each sweep stage declares its files where it is registered (the default res/<sweep>.jsonl, or
    its -o), from the same names its command sweeps: what a re-record moves aside is what it writes."""
    stages = {s.name: s for s in record.stages(0.25)}
    zoo = stages["zoo"]
    assert zoo.appends == tuple(f"{{res}}/{n}.jsonl" for n in record.zoo())
    assert zoo.cmd[zoo.cmd.index("sweep") + 1:][:len(record.zoo())] == record.zoo()
    assert stages["tune-softmax-floats"].appends == ("{res}/tune-softmax-floats.jsonl",)
    dask = stages["dask"]
    assert dask.appends == ("{res}/dask-softmax.jsonl",) and dask.cmd[dask.cmd.index("-o") + 1] == dask.appends[0]
    assert stages["floors"].appends == () == stages["tests"].appends
    assert all(s.appends for s in stages.values() if "sweep" in s.cmd)
    # sgemm_vs_cublas appends its rows beside its --out table (0f8bba0b1d9a's H200 file held two recordings)
    cub = stages["sgemm-vs-cublas"]
    assert cub.appends == (cub.cmd[cub.cmd.index("--out") + 1].replace(".json", ".jsonl"),)


def test_a_rerecord_moves_rows_of_another_commit_aside_and_resumes_its_own(tmp_path, monkeypatch):
    """A sweep appends: re-recorded at a new commit, a file would hold two recordings (README's tables
    would count both). The stage moves such a file to the logs first; a file of this commit stays,
    so a stage cut off and run again resumes."""
    import sys

    res, logs = tmp_path / "gpu", tmp_path / "logs"  # results/<slug>/
    res.mkdir()
    old = _rows_file(res / "a.jsonl", ["0ld", "0ld"])
    mine = _rows_file(res / "b.jsonl", ["new"])
    mixed = _rows_file(res / "c.jsonl", ["new", "0ld"])
    seen = tmp_path / "seen.txt"
    probe = f"import pathlib; pathlib.Path({str(seen)!r}).write_text(' '.join(sorted(p.name for p in pathlib.Path({str(res)!r}).iterdir())))"
    files = ("{res}/a.jsonl", "{res}/b.jsonl", "{res}/c.jsonl")
    monkeypatch.setattr(record, "stages", lambda b: [record.Stage("s", [sys.executable, "-c", probe], 0, files)])
    monkeypatch.setattr(record.device, "properties", lambda: {"slug": "gpu"})
    monkeypatch.setattr(record.device, "provenance", lambda: {"commit": "new"})
    monkeypatch.setattr(record, "results_dir", lambda: tmp_path)
    done = record.main(["--logs", str(logs), "--deadline", "60"])
    assert done["stages"][0]["status"] == "ok"
    assert seen.read_text() == "b.jsonl"  # what the stage's command found: only this commit's file
    assert sorted(p.name for p in (logs / "superseded").iterdir()) == ["a.jsonl.superseded", "c.jsonl.superseded"]
    assert not old.exists() and mine.exists() and not mixed.exists()
    assert "a.jsonl: rows of another commit moved to" in (logs / "s.log").read_text()



@pytest.mark.parametrize("how", ["exit 1", "Ctrl-C"])
def test_a_stage_that_does_not_finish_puts_the_earlier_recording_back(tmp_path, monkeypatch, how):
    """A stage cut off (its limit, an error, Ctrl-C) after its sweep files were moved aside: results/
    gets the earlier, whole recordings back, also of a sweep it never reached, and what it wrote goes
    to logs/partial/, never half a recording under the results name."""
    import subprocess
    import sys

    res, logs = tmp_path / "gpu", tmp_path / "logs"
    res.mkdir()
    a = _rows_file(res / "a.jsonl", ["0ld", "0ld"])
    b = _rows_file(res / "b.jsonl", ["0ld"])
    before = a.read_text(), b.read_text()
    part = f"import pathlib, sys; pathlib.Path({str(a)!r}).write_text('a first row of this run'); sys.exit(1)"
    files = ("{res}/a.jsonl", "{res}/b.jsonl")
    monkeypatch.setattr(record, "stages", lambda b_: [record.Stage("s", [sys.executable, "-c", part], 0, files)])
    monkeypatch.setattr(record.device, "properties", lambda: {"slug": "gpu"})
    monkeypatch.setattr(record.device, "provenance", lambda: {"commit": "new"})
    monkeypatch.setattr(record, "results_dir", lambda: tmp_path)
    if how == "Ctrl-C":
        run = subprocess.run

        def interrupted(*args, **kw):
            run(*args, **kw)
            raise KeyboardInterrupt
        monkeypatch.setattr(record.subprocess, "run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            record.main(["--logs", str(logs), "--deadline", "60"])
    else:
        done = record.main(["--logs", str(logs), "--deadline", "60"])
        assert done["stages"][0]["status"] == "exit 1"
        assert "a.jsonl: the stage did not finish (1): the earlier recording is back" in (logs / "s.log").read_text()
    assert (a.read_text(), b.read_text()) == before  # b: never reached, back all the same
    assert [p.name for p in (logs / "partial").iterdir()] == ["a.jsonl.partial"]
    assert not list((logs / "superseded").iterdir())


def test_the_gpu_half_runs_every_gpu_test_file():
    """`pytest -m gpu` in parts: the steps between them name every tests/test_*_gpu.py (the planted
    race only in racecheck's), so a GPU test file added later is not left out of the recorded GPU half."""
    from pathlib import Path

    from labkit.benchmarks.gpu_tests import STEPS

    named = {Path(a).name for argv in STEPS.values() for a in argv if a.endswith("_gpu.py")}
    files = {f.name for f in Path(__file__).parent.glob("test_*_gpu.py")}
    assert files <= named, sorted(files - named)


def test_supersede_leaves_a_link_and_keeps_a_torn_files_rows_of_this_commit(tmp_path):
    """A link at a results name is not read or moved (the sweep then refuses it by name); a torn last
    line costs only itself: the file's other rows decide."""
    logs = tmp_path / "logs"
    target = _rows_file(tmp_path / "elsewhere.jsonl", ["0ld"])
    (tmp_path / "link.jsonl").symlink_to(target)
    torn = _rows_file(tmp_path / "torn.jsonl", ["new"])
    torn.write_text(torn.read_text() + '{"op": "ad')
    with pytest.warns(UserWarning, match="malformed"):
        moved = record.supersede([tmp_path / "link.jsonl", torn, tmp_path / "none.jsonl"], "new", logs)
    assert moved == [] and (tmp_path / "link.jsonl").is_symlink() and torn.exists() and not logs.exists()


def test_aa_rows_that_are_not_pairs_are_refused_by_name():
    from labkit.errors import ConfigError
    from labkit.selftest import from_rows

    with pytest.raises(ConfigError, match="A/A rows come in A/B pairs; got 3 rows"):
        from_rows([{}] * 3)


def test_the_reconcile_stage_starts_afresh_at_a_new_commit_and_resumes_its_own(tmp_path):
    """reconcile.json is a table ({"configs": [...]}, each configuration with its commit), not rows: the
    stage declares it, supersede() moves a table of another commit aside (the reconcile, which resumes
    what its file holds, then measures every configuration) and keeps one of this commit; a stage cut
    off gets the old table back."""
    import json

    stage = {s.name: s for s in record.stages(0.25)}["reconcile"]
    assert stage.appends == ("{res}/reconcile.json",) and "--fresh" not in stage.cmd
    logs = tmp_path / "logs"
    table = tmp_path / "reconcile.json"
    table.write_text(json.dumps({"configs": [{"op": "add", "commit": "new"}, {"op": "add", "commit": "0ld"}]}))
    assert record.supersede([table], "new", logs) == [table] and not table.exists()
    table.write_text(json.dumps({"configs": [{"op": "add", "commit": "new"}]}))  # what the cut-off stage wrote
    assert record.restore([table], logs) == [table]
    assert json.loads(table.read_text())["configs"][1]["commit"] == "0ld"
    assert json.loads((logs / "partial" / "reconcile.json.partial").read_text())["configs"][0]["commit"] == "new"
    table.write_text(json.dumps({"configs": [{"op": "add", "commit": "new"}]}))
    assert record.supersede([table], "new", logs) == [] and table.exists()
    table.write_text("{cut off")  # left for the stage, which names the file
    assert record.supersede([table], "new", logs) == [] and table.exists()


def test_a_linked_reconcile_table_is_left_to_its_stage(tmp_path):
    """A results file that is a symlink is not read through (as for a sweep's rows): left where it is."""
    import json

    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"configs": [{"op": "add", "commit": "0ld"}]}))
    table = tmp_path / "reconcile.json"
    table.symlink_to(real)
    assert record.supersede([table], "new", tmp_path / "logs") == [] and table.is_symlink()
