"""Issue 22: does same-launch CUPTI move the event times? labkit rows with and without CUPTI,
triton's graph with and without CUPTI on, nvbench cold; add f16, one process."""
import json, os, sys
import numpy as np
import torch
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from labkit.cupti import Probe
from triton.testing import do_bench_cudagraph

out = {"gpu": torch.cuda.get_device_name(), "rows": []}
for variant in ["f16x8_pack", "torch"]:
  for shape in ["1024x1024", "2048x2048", "4096x4096", "8192x8192"]:
    cfgs = configs("add", variant, shape, "f16", ["cold", "cold-dirty", "hot"])
    res = []
    for rep in range(2):
        for kt in (False, True):
            runner = Runner(peak=False, kernel_time=kt)
            for c in cfgs:
                r = runner.run(c)
                res.append(("labkit", f"{c.mode} cupti={kt}", r.get("time_us"), r.get("kernel_us"), r.get("stop_reason"), r.get("blocking")))
    s = h.Subject(cfgs[0])
    for on in (False, True, False):
        with torch.cuda.stream(torch.cuda.Stream()):
            if on:
                with Probe():
                    ms = do_bench_cudagraph(s.go, return_mode="all")
            else:
                ms = do_bench_cudagraph(s.go, return_mode="all")
        res.append(("triton", f"graph cupti={on}", float(np.median(ms)) * 1e3, None, "", ""))
    assert s.recheck() is None
    del s; torch.cuda.empty_cache()
    for r in h.nvbench_rows(cfgs[0], 10.0):
        res.append(("nvbench", r["measure"], r["median_us"], None, r["note"], ""))
    for r in res:
        print(f"{variant:10s} {shape:10s} {r[0]:8s} {r[1]:22s} {r[2] or float('nan'):9.3f} {r[3] or float('nan'):9.3f} {r[4]} {r[5]}")
    out["rows"].append({"variant": variant, "shape": shape, "rows": res})
    sys.stdout.flush()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "cupti_exp.json"), "w"), indent=1)
