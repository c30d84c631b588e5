"""labkit's cache states beside nvbench, triton and Nsight Systems, on the configurations README
shows (labkit.clocks): add f16 1024² … 8192² (f16x8_pack and torch) and softmax_rows f16 16384x4096
(f16x8 and torch).

    python -m labkit.benchmarks.reconcile [--out RESULTS] [--fresh] [--budget S] [--skip nsys ...]

Writes RESULTS/<gpu>/reconcile.json (RESULTS: results/ or $LABKIT_RESULTS) after every
configuration; a configuration already in the file is kept (a run cut off resumes), unless --fresh.
Nsight Systems profiles each op's configurations in one run. README's `data:reconcile` block
renders the file (labkit.readme)."""
from __future__ import annotations

import argparse
import json

from labkit import device
from labkit.clocks import configs, measure, text
from labkit.clocks.harnesses import EXTERNAL, nsys_table
from labkit.errors import ConfigError
from labkit.paths import results_dir

from . import write_json

FILE = "reconcile.json"
CONFIGS = [("add", v, "f16", f"{n}x{n}") for n in (1024, 2048, 4096, 8192) for v in ("f16x8_pack", "torch")] + \
          [("softmax_rows", v, "f16", "16384x4096") for v in ("f16x8", "torch")]


def _key(rec) -> tuple:
    return rec["op"], rec["variant"], rec["dtype"], rec["shape"]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="results folder (default: results/, or $LABKIT_RESULTS)")
    ap.add_argument("--fresh", action="store_true", help="measure every configuration again")
    ap.add_argument("--budget", type=float, default=1.0, help="labkit's seconds of sampling per state (1)")
    ap.add_argument("--timeout", type=float, default=15.0, help="nvbench's seconds per measurement (15)")
    ap.add_argument("--skip", nargs="+", default=[], choices=EXTERNAL, help="harnesses not to run")
    a = ap.parse_args(argv)
    device.require_gpu()
    path = results_dir(a.out) / device.properties()["slug"] / FILE
    res = {"configs": []}
    if path.exists() and not a.fresh:
        try:
            res = json.loads(path.read_text())
        except ValueError:
            raise ConfigError(f"{path} is not valid JSON (cut off while written?): move it away, or run with "
                              "--fresh to measure every configuration again") from None
    done = {_key(r) for r in res["configs"]}
    todo = [c for c in CONFIGS if c not in done]
    for op in dict.fromkeys(c[0] for c in todo):
        mine = [c for c in todo if c[0] == op]
        cfgs = {c: configs(c[0], c[1], c[3], c[2], rule={"budget_s": a.budget}) for c in mine}
        states = [x.mode for x in next(iter(cfgs.values()))]
        nsys = None if "nsys" in a.skip else nsys_table(op, dict.fromkeys(c[1] for c in mine),
                                                        dict.fromkeys(c[3] for c in mine), mine[0][2], states)
        for c in mine:
            rec = measure(cfgs[c], a.skip, a.timeout, nsys)
            res["configs"].append(rec)
            write_json(path, res)
            print(text(rec) + "\n", flush=True)
    print(f"{len(res['configs'])} configurations in {path}")
    return res


if __name__ == "__main__":
    main()
