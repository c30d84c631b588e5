"""Stand-ins for labkit.runner.Runner in worker processes, so the worker protocol, the --gpus
split and the Dask path are tested without a GPU. The variant's name says what to do:
ok (a row), slow / slower (sleep 0.05 / 0.6 s), hang (never answers), die (the process is killed), lost (a
CUDA context that did not survive), boom (an unexpected Python error)."""
import os
import signal
import time


class FakeRunner:
    def __init__(self, **kw):
        self.kw = kw
        self.phase = lambda name: None
        self.index = int(os.environ.get("LABKIT_GPU_INDEX", "0"))
        self.built = set()

    def prebuild(self, configs):
        self.built |= {c.variant.name for c in configs}
        return len(configs)

    def identity(self):
        return {"gpu": "Fake GPU", "gpu_index": self.index, "pid": os.getpid()}

    def run(self, cfg):
        from labkit.runner import ContextLost

        name = cfg.variant.name
        self.phase("compile")
        self.phase("timed")
        row = {"op": cfg.op, "variant": cfg.variant_s, "dtype": cfg.dtype, "shape": cfg.shape_s, "mode": cfg.mode,
               "offset": cfg.offset, "status": "ok", "time_us": 1.0 + cfg.shape[0] / 1e6, "gpu": "Fake GPU",
               "gpu_index": self.index, "pid": os.getpid(), "commit": "test", "dirty": False,
               "prebuilt": ",".join(sorted(self.built))}
        if name == "slow":
            time.sleep(0.05)
        elif name.startswith("slower"):  # slower, slower2, ...: several slow configurations in a group
            time.sleep(0.6)
        elif name == "hang":
            time.sleep(3600)
        elif name == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        elif name == "lost":
            e = ContextLost("an illegal memory access was encountered")
            e.record = dict(row, status="error", error="CUDA error: an illegal memory access was encountered",
                            kernel="boom_kernel", context_lost=True)
            del e.record["time_us"]
            raise e
        elif name == "boom":
            raise ValueError("not a measurement outcome")
        return row


def configs(names, shapes=((64, 64),), op="add"):
    """Configs of fake variants (names) over shapes, as the run loop would get them."""
    from labkit.config import Config, make_rule
    from labkit.spec import Variant

    rule = make_rule(budget_s=0.01)
    return [Config(op, Variant(n, "f32"), s, "cold", 0, rule) for s in shapes for n in names]
