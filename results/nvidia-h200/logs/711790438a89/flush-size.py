"""cold-dirty at 2048^2 add f16: does the write flush's size (1x vs 2x the L2) explain labkit's +2-5 % over
nvbench's cold (whose flush is one L2-sized memset)?"""
import torch
from labkit import device, timing
from labkit.config import make_rule, resolve
from labkit.runner import Runner

l2 = device.properties()["l2_bytes"]
bufs = {}
def sized(f):
    def get():
        if f not in bufs:
            bufs[f] = (torch.zeros(int(f * l2) // 4, dtype=torch.float32, device="cuda"), torch.zeros((), device="cuda"))
        return bufs[f]
    return get
runner = Runner(peak=False, kernel_time=False)
rule = make_rule(budget_s=0.6, noise_target=0.002)
for shape in ("2048x2048", "4096x4096"):
    for rep in range(2):
        for f in (2, 1, 0.5):
            timing._flush_buffer = sized(f)
            for v in ("f16x8_pack", "torch"):
                r = runner.run(resolve("add", v, "f16", shape, "cold-dirty", rule=rule))
                print(f"{shape} rep {rep} flush {f}x L2 {v:11s} cold-dirty {r['time_us']:8.3f} us  ci {r['ci_lo_us']:.3f}-{r['ci_hi_us']:.3f}", flush=True)
