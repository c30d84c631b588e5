"""Issue 22: why labkit's cold-dirty and hot differ from nvbench cold / do_bench_cudagraph at small
shapes. Variants of the flush and of the graph length, all in one process, add f16."""
import json, os, sys, time
import torch
import labkit.timing as T
from labkit import cache_states as C
from labkit.device import properties, sm_clock
from labkit.clocks import configs
from labkit.clocks import harnesses as h

L2 = properties()["l2_bytes"]
_buf = {}
def _mem(n_l2, how):
    key = (n_l2, how)
    if key not in _buf:
        _buf[key] = torch.empty(int(n_l2 * L2), dtype=torch.uint8, device="cuda")
    b = _buf[key]
    if how == "memset":
        import cupy
        cupy.cuda.runtime.memsetAsync(b.data_ptr(), 0, b.numel(), torch.cuda.current_stream().cuda_stream)
    else:
        b.zero_()
T.FLUSHES["memset1"] = lambda: _mem(1, "memset")
T.FLUSHES["zero1"] = lambda: _mem(1, "zero")
T.FLUSHES["memset2"] = lambda: _mem(2, "memset")
T.FLUSHES["zero256M"] = lambda: _mem(256e6 / L2, "zero")

def mk(name, flush):
    cls = type(name, (C.ColdDirty,), {"name": name, "flush": flush, "description": name})
    C.register(cls)
for n, f in [("cd-memset1", "memset1"), ("cd-zero1", "zero1"), ("cd-memset2", "memset2"), ("cd-zero256M", "zero256M")]:
    mk(n, f)
class Hot20(C.Hot):
    name = "hot20"
C.register(Hot20)
_orig = T._sample
def _sample(state, fns, hot_target_s):
    if state.name == "hot20":
        T.HOT_MAX_BATCH = 20000
        try:
            return _orig(state, fns, 20e-3)
        finally:
            T.HOT_MAX_BATCH = 1000
    return _orig(state, fns, hot_target_s)
T._sample = _sample

out = {"gpu": torch.cuda.get_device_name(), "l2": L2, "rows": []}
states = ["cold", "cold-dirty", "cd-memset1", "cd-zero1", "cd-memset2", "cd-zero256M", "hot", "hot20"]
for variant in ["f16x8_pack", "torch"]:
  for shape in ["1024x1024", "2048x2048", "4096x4096"]:
    cfgs = configs("add", variant, shape, "f16", states)
    subject = h.Subject(cfgs[0])
    rows = h.labkit_rows(cfgs)
    from triton.testing import do_bench_cudagraph, do_bench
    import numpy as np
    for rep in (2, 20, 100):
        with torch.cuda.stream(torch.cuda.Stream()):
            c0 = sm_clock()[0]
            ms = do_bench_cudagraph(subject.go, rep=rep, return_mode="all")
            c1 = sm_clock()[0]
        rows.append(h.row("triton", f"graph rep={rep}", "events", float(np.median(ms)) * 1e3, len(ms), f"clock {c0}->{c1}"))
    rows.append(h.row("triton", "do_bench", "events", float(np.median(do_bench(subject.go, return_mode="all"))) * 1e3))
    assert subject.recheck() is None
    del subject; torch.cuda.empty_cache()
    rows += h.nvbench_rows(cfgs[0], 10.0)
    for r in rows:
        print(f"{variant:10s} {shape:10s} {r['harness']:8s} {r['measure']:16s} {r['clock']:6s} {r['median_us'] or float('nan'):9.3f} {r['note']}")
    out["rows"].append({"variant": variant, "shape": shape, "rows": rows})
    sys.stdout.flush()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "recon_exp.json"), "w"), indent=1)
