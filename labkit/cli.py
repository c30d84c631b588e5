"""The `labkit` command. With no arguments: seed 000's elementwise-add table on this GPU, or a short
summary of the recorded results without one. Every subcommand builds Configs (labkit.config) and
hands them to the one run loop (labkit.session)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import pydoc
import signal
import sys
import threading
import time

from . import cache_states, device
from .errors import ConfigError, LabkitError
from .notebooks import add_parser as add_workshop_parser, cmd_workshop
from .registry import family_exports, get_op, ops
from .selftest import aa
from .version import __version__
from .why import why

EPILOG = """examples:
  labkit                                   seed 000's add table on this GPU (a summary without one)
  labkit list                              ops, variants, dtypes, vector widths, tuning axes
  labkit bench add -v f16x8,f16x8_pack -s 4096x4096 --mode cold hot
  labkit bench add -d f16 -w 8 --axis block=128,256,512
  labkit sweep seed000 --gpus all          every GPU of this host, one worker each
  labkit sass add --diff f16x8 f16x8_pack  machine code side by side (no GPU needed)
  labkit why add f16x8 4096x4096           why a variant runs as fast as it does
  labkit reconcile add f16x8_pack 4096x4096 -d f16
  labkit aa add f16x8_pack 4096x4096       A/A self-test: how often this GPU calls one kernel faster than itself
  labkit recorded                          tables recorded on real GPUs (no GPU needed)
  labkit serve                             this box's GPUs for a workshop's laptops (labkit.connect)

Every run is checked against a float64 reference before it is timed, and again after; a variant
that fails is reported as FAILED and never shown with a time. Times are CUDA events behind a
blocking kernel (no host cost inside) with the kernels' own CUPTI time beside them."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="labkit", description="Write, check, time and profile CUDA kernels.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print labkit's version, commit, torch and CUDA")
    p.add_argument("--all", action="store_true",
                   help="without a GPU: every recorded table, not the summary (paged on a terminal)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    b = sub.add_parser("bench", help="check and time variants of one op over shapes")
    b.add_argument("op", help="op name (see `labkit list`)")
    b.add_argument("-v", "--variants", help="comma-separated variant names (default: all; torch always runs)")
    b.add_argument("-d", "--dtype", help="only variants of this dtype (f32, f16, bf16, ...)")
    b.add_argument("-w", "--width", type=int,
                   help="only variants of this vector width (needs --dtype; with -v, each one named must have it)")
    b.add_argument("-s", "--shapes", nargs="+", help="shapes like 4096x4096, 64MiB, 2^20+3 (default: the op's)")
    b.add_argument("--mode", nargs="+", default=["cold"], choices=cache_states.names(),
                   help="cache states: " + "; ".join(f"{s.name}: {s.description}" for s in cache_states.STATES.values()))
    b.add_argument("--offset", type=int, default=0, help="start tensors this many elements into their buffer")
    b.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2",
                   help="sweep a tuning axis, e.g. block=128,256,512 (see `labkit list OP`)")
    _common(b)

    s = sub.add_parser("sweep", help="run a declared sweep into a result file (resumable)")
    s.add_argument("name", nargs="*", help="sweep names, run one after the other by one set of workers (omit to list them)")
    s.add_argument("-o", "--out", help="result file (.jsonl; default results/<gpu>/<sweep>.jsonl)")
    s.add_argument("--cluster", help="run on a Dask cluster: local-cuda (one worker per GPU) or tcp://HOST:8786")
    _common(s)

    ls = sub.add_parser("list", help="list ops, their variants and tuning axes")
    ls.add_argument("op", nargs="?")
    sa = sub.add_parser("sass", help="registers and global load/store widths per variant (needs nvcc, no GPU)")
    sa.add_argument("op", nargs="?", default="add")
    sa.add_argument("--arch", default="90", help="compute capability, e.g. 80 or 90 (default 90)")
    sa.add_argument("--diff", nargs=2, metavar=("A", "B"), help="two variants' SASS side by side")
    pk = sub.add_parser("peak", help="this GPU's measured ceilings (copy peak, L2, FMA, event floor)")
    pk.add_argument("--remeasure", action="store_true")
    sub.add_parser("build", help="build the whole catalog now and report the build time")
    r = sub.add_parser("recorded", help="show results recorded on real GPUs (no GPU needed; paged on a terminal)")
    r.add_argument("path", nargs="?", help="a result file or folder (default: results/)")
    w = sub.add_parser("why", help="a diagnosis card: why a variant runs as fast as it does")
    w.add_argument("op")
    w.add_argument("variant")
    w.add_argument("shape", nargs="?")
    w.add_argument("-d", "--dtype")
    w.add_argument("--recorded", action="store_true", help="from the recorded results, not a live run")
    w.add_argument("--gpu", help="which recorded GPU (a results/ folder or GPU name, e.g. nvidia-h200); implies --recorded")
    w.add_argument("--budget", type=float, default=1.0, help="live: seconds of sampling per mode (default 1)")
    t = sub.add_parser("aa", help="A/A self-test: one configuration as pairs of rows; the share not called SAME")
    t.add_argument("op")
    t.add_argument("variant")
    t.add_argument("shape", nargs="?")
    t.add_argument("-d", "--dtype")
    t.add_argument("--mode", default="cold", choices=cache_states.names())
    t.add_argument("--pairs", type=int, default=20, help="A/B pairs of the same kernel (default 20)")
    _common(t)
    from .clocks.cli import add_reconcile_parser
    from .nsight.cli import add_profile_parser
    from .serve.server import add_serve_parser

    add_profile_parser(sub)
    add_reconcile_parser(sub)
    add_workshop_parser(sub)
    add_serve_parser(sub)
    return p


def _common(p):
    from .stats import StopRule

    p.add_argument("--budget", type=float, default=1.0, help="seconds of sampling per configuration (default 1)")
    p.add_argument("--noise", type=float, default=StopRule.noise_target,
                   help="stop when the median's 95%% interval half-width is below this fraction of it (%(default)s)")
    p.add_argument("--no-kernel-time", dest="kernel_time", action="store_false",
                   help="skip the CUPTI kernel time (it is recorded by default where CUPTI is free)")
    p.add_argument("--energy", action="store_true", help="also sample power and energy with NVML")
    p.add_argument("--gpus", default=None, help="GPUs to spread the run over: all, or indices like 0,1 (default all)")
    p.add_argument("--in-process", action="store_true",
                   help="measure in this process instead of worker processes (a kernel fault ends the run)")
    p.add_argument("--csv", help="also write the rows as CSV (checked before anything runs)")
    p.add_argument("--json", help="also write the rows as JSON (checked before anything runs)")


def _rule(a):
    """--budget and --noise as a StopRule (which checks them: the command line adds no checks of its own)."""
    from .config import make_rule

    return make_rule(budget_s=a.budget, noise_target=a.noise)


def _outputs(a) -> None:
    from .records import check_output

    if a.csv:
        check_output(a.csv, (".csv",), "--csv")
    if a.json:
        check_output(a.json, (".json",), "--json")


def _write(rows, a) -> None:
    from .records import save

    for path in (a.csv, a.json):
        if path:
            print(f"wrote {save(rows, path)}")


def _axes(specs) -> dict:
    out = {}
    for spec in specs:
        name, _, vals = spec.partition("=")
        try:
            out[name.strip()] = [int(x) for x in vals.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--axis {spec!r}: expected NAME=V1,V2 with integer values") from None
        if not out[name.strip()]:
            raise ConfigError(f"--axis {spec!r}: give at least one value")
    return out


def _ex_kw(a) -> dict:
    """labkit.session's executor settings from the command line."""
    return dict(workers=not a.in_process, gpus=a.gpus, kernel_time=a.kernel_time, energy=a.energy,
                cluster=getattr(a, "cluster", None))


def _run(configs, a, title, log=None, ex=None):
    """Run configs; `ex`: an executor several runs share (left open), else run makes and closes its own."""
    from .records import ResultLog
    from .session import run

    log = log if log is not None else ResultLog()
    try:
        run(configs, log, ex, title=title, **_ex_kw(a))
    finally:
        if log.rows:  # also on Ctrl-C or an error: --csv/--json keep what was measured
            _write(log.rows, a)
    return log.rows


def cmd_bench(a):
    from .config import plan
    from .tables import pivot_table, seed_table

    _outputs(a)
    configs = plan(a.op, a.variants, a.dtype, a.shapes, tuple(a.mode), a.width, a.offset, _rule(a),
                   axes=_axes(a.axis) or None)
    rows = _run(configs, a, f"bench {configs[0].op}")
    print(seed_table(rows))
    if len(configs[0].spec.shape_axes) == 1:
        print(pivot_table(rows))
    return 0 if all(r["status"] in ("ok", "skipped") for r in rows) else 1


def cmd_sweep(a):
    from .records import ResultLog, check_output
    from .session import executor
    from .sweeps import SWEEPS, default_out, get_sweep
    from .tables import pivot_table, seed_table

    if not a.name:
        for s in SWEEPS.values():
            print(f"{s.name:14} {s.description}")
        return 0
    sweeps = [get_sweep(n) for n in a.name]  # every name checked before anything runs
    if len(sweeps) > 1 and (a.out or a.csv or a.json):
        raise ConfigError("-o / --csv / --json name one sweep's files: give one sweep name with them")
    if a.out:
        check_output(a.out, (".jsonl",), "sweep file (-o; rows are appended as they are measured: use --csv for a CSV copy)")
    _outputs(a)
    ex = executor(**_ex_kw(a))  # one worker pool (or process) for all the sweeps named
    try:
        for sweep in sweeps:
            out = a.out or default_out(sweep.name)
            rows = _run(sweep.configs(_rule(a)), a, f"sweep {sweep.name}", ResultLog(out), ex)
            print(pivot_table(rows) if sweep.op == "copy" else seed_table(rows))
            print(f"rows in {out}")
    finally:
        if not getattr(ex, "shared", False):  # the session's worker pool closes itself at exit
            ex.close()
    return 0


def cmd_list(a):
    for op in [get_op(a.op)] if a.op else ops().values():
        print(f"{op.name}: {op.title}  (kernels/{op.source}; shape {'x'.join(op.shape_axes)}; {op.bound}-bound)")
        for v in op.variants_for(include_torch=False):
            print(f"  {v.name:14} {v.dtype:5} width {v.width:<3} {v.access:>2} B/access  {v.note}")
        print(f"  {'torch':14} {'any':5} baseline")
        for name, (default, values) in op.axes.items():
            print(f"  axis {name}: {', '.join(map(str, values))} (default {default})")
    if not a.op:  # the cache states --mode takes (labkit.cache_states)
        print("cache modes:\n" + "\n".join(f"  {s.name:11} {s.description}" for s in cache_states.STATES.values()))
    return 0


def cmd_sass(a):
    from . import sass, sass_diff

    if a.diff:
        print(sass_diff.diff_text(a.op, *a.diff, arch=a.arch))
        return 0
    print(sass.report(a.op, a.arch).to_string(index=False))
    return 0


def cmd_peak(a):
    from .ceilings import device_facts

    f = device_facts(remeasure=a.remeasure)
    if f is None:  # under a profiler, with no clean measurement of this GPU model
        return 1
    fl = ", ".join(f"{m} " + (f"{x['overhead_us']:.2f} µs" if x.get("overhead_us") is not None else "unknown (no CUPTI)")
                   for m, x in f["floor"].items())
    print(f"{f['gpu']}: copy peak {f['copy_peak_gbps']:.0f} GB/s (torch copy {f['torch_copy_gbps']:.0f}, labkit w16 "
          f"{f['labkit_w16_gbps']:.0f}; bytes read + written), L2 {f['l2_gbps']:.0f} GB/s, FP32 FMA {f['fma_tflops']:.1f} "
          f"TFLOP/s; event overhead {fl} (measured {f['date']}, {f['ref']})")
    return 0


def cmd_build(a):
    from .build import build_all

    t = time.perf_counter()
    libs = build_all({o.source: family_exports(o.source) for o in ops().values()})
    print(f"built {len(libs)} kernel libraries in {time.perf_counter() - t:.1f} s")
    return 0


def cmd_recorded(a, summary=False):
    from .recorded import recorded_text

    text = recorded_text(a.path, summary=summary)
    if sys.stdout.isatty() and not summary:  # thousands of lines: $PAGER (less); a pipe or file gets them all
        os.environ.setdefault("LESS", "FRX")  # as git: less quits at once when the text fits one screen
        pydoc.pager(text)
    else:
        print(text)
    return 0


def cmd_why(a):
    print(why(a.op, a.variant, a.shape, a.dtype, recorded=a.recorded or a.gpu is not None, gpu=a.gpu,
              budget_s=a.budget).text())
    return 0


def cmd_aa(a):
    _outputs(a)
    res = aa(a.op, a.variant, a.shape, a.dtype, a.mode, a.pairs, _rule(a), workers=not a.in_process, gpus=a.gpus,
             kernel_time=a.kernel_time, energy=a.energy)
    print(res.text())
    _write(res.rows, a)
    return 0 if res.ok else 1


def version_text() -> str:
    c = device.commit()
    text = f"labkit {__version__} (commit {c['commit']}{'+dirty' if c.get('dirty') else ''})"
    if importlib.util.find_spec("torch"):
        import torch

        text += f", torch {torch.__version__}, CUDA {torch.version.cuda or 'none (CPU build)'}"
    return text


class Terminated(KeyboardInterrupt):
    """SIGTERM, a polite kill (`timeout`, a batch scheduler, `kill`): it ends a command as Ctrl-C does,
    so the rows measured before it stay in the results file and in --csv / --json."""

    rc = 128 + signal.SIGTERM


def _terminated(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    # the handler only where signals can be handled (the main thread), and the caller's back afterwards
    old = signal.signal(signal.SIGTERM, _terminated) if threading.current_thread() is threading.main_thread() else None
    try:
        rc = _main(argv)
        sys.stdout.flush()  # a reader that left (`labkit recorded | head`) shows here, not at exit
        return rc
    except BrokenPipeError:  # Python's recipe: no traceback, and no second error when exit flushes stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE: what a shell reports for a program that SIGPIPE ended
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _main(argv) -> int:
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.version:
            print(version_text())
            return 0
        if a.cmd is None:  # the useful default: seed 000's table on this GPU, else the recorded summary
            if not device.gpu_present():
                print(f"labkit: {device.NO_GPU}\n", file=sys.stderr)
                return cmd_recorded(p.parse_args(["recorded"]), summary=not a.all)
            from .main_job import main as main_job

            return main_job(_ex_kw(p.parse_args(["bench", "add"])))
        from .clocks.cli import cmd_reconcile
        from .nsight.cli import cmd_profile
        from .serve.server import cmd_serve

        return {"bench": cmd_bench, "sweep": cmd_sweep, "list": cmd_list, "sass": cmd_sass, "peak": cmd_peak,
                "build": cmd_build, "recorded": cmd_recorded, "profile": cmd_profile, "why": cmd_why,
                "reconcile": cmd_reconcile, "workshop": cmd_workshop, "aa": cmd_aa, "serve": cmd_serve}[a.cmd](a)
    except LabkitError as e:
        print(f"labkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C: 130; SIGTERM (Terminated): 143, as a shell reports them
        return getattr(e, "rc", 130)


if __name__ == "__main__":
    sys.exit(main())
