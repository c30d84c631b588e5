"""Sweeps declared as data (triton's `Benchmark`, nvbench's axes): an op and its axes, keyword-only.
`labkit sweep NAME` turns one into Configs (`Sweep.configs`) for the one run loop and appends its
rows to results/<gpu>/<name>.jsonl as they are measured (resumable)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import device
from .config import plan
from .errors import ConfigError, NoGPUError
from .paths import gpu_slug, results_dir
from .registry import ops
from .spec import suggest


@dataclass(frozen=True, kw_only=True)
class Sweep:
    name: str
    op: str
    variants: tuple | str = "all"        # variant names, or "all" (every variant; torch always runs)
    dtype: str | None = None
    shapes: tuple = ()                   # () = the op's default shapes
    modes: tuple = ("cold", "rotating", "hot")  # issue 22: what a recording holds per configuration
    # tuning axes: a dict, every combination of its values (e.g. {"block": (128, 256, 512)}), or a
    # tuple of such dicts, the union of their combinations (value sets that are not a grid: sgemm's tiles)
    axes: dict | tuple = field(default_factory=dict)
    description: str = ""

    def configs(self, rule=None) -> list:
        variants = self.variants if isinstance(self.variants, str) else list(self.variants)
        sets = self.axes if isinstance(self.axes, tuple) else (self.axes,)
        out = {}  # by key: the torch baseline and variants without axes come once
        for ax in sets:
            for c in plan(self.op, variants, self.dtype, list(self.shapes) or None, self.modes, rule=rule, axes=ax or None):
                out.setdefault(c.key, c)
        return list(out.values())


def zoo_sweeps() -> list:
    """One sweep per kernel-zoo op (Op.group "zoo", CATALOG §3-§5), named after it: every variant +
    torch at its default shapes. The recording's zoo stage runs them; the seed ops' sweeps are named below."""
    return [Sweep(name=name.replace("_", "-"), op=name, description=f"{op.title}: every variant + torch at its default shapes")
            for name, op in ops().items() if op.group == "zoo"]


# sgemm tuned's tiles, as changes from DEFAULT_TILE (warptile_async's tile: 128x128x8 blocks, 64x32
# warps, 8x8 threads, 3 stages, groups of 8; {"stages": 3} is that tile itself, {} tuned's shipped one
# on this GPU): the 8x8 thread tile at other depths, stages and orders, and the 8x16 thread tile
# (64x64 warps) in 128x256, 256x128 and 128x128 blocks (the last: 4 warps, as cuBLAS's)
_T16 = {"wn": 64, "tn": 16}
SGEMM_TILES = (
    {}, {"stages": 3}, {"stages": 2}, {"stages": 4}, {"bk": 16}, {"bk": 16, "stages": 2}, {"bk": 16, "stages": 4},
    {"group": 1}, {"group": 16}, {"wm": 32, "wn": 64}, {"bm": 64, "wm": 32, "wn": 64},
    {"bn": 256, **_T16}, {"bn": 256, **_T16, "stages": 2}, {"bn": 256, **_T16, "stages": 4},
    {"bn": 256, **_T16, "group": 16}, {"bn": 256, **_T16, "bk": 16, "stages": 2}, {"bn": 256, **_T16, "bk": 16},
    {"bm": 256, **_T16}, _T16, {**_T16, "stages": 4}, {**_T16, "bk": 16}, {**_T16, "bk": 16, "stages": 4},
)
SGEMM_SHAPES = ((4096, 4096, 4096), (2048, 2048, 1024), (2500, 6000, 1792))  # issue 25's acceptance shapes

SWEEPS = {s.name: s for s in [
    Sweep(name="seed000", op="add",
          description="seed 000's table: every add variant + torch at S, K in {1024, 2048, 4096}"),
    Sweep(name="access-width", op="copy", description="seed 001's table: copy at 1/2/4/8/16-byte accesses, 1 MiB ... 4 GiB"),
    Sweep(name="copy-gs", op="copy_gs", description="seed 003: grid-stride int / int2 / int4 copies with a capped block count"),
    *zoo_sweeps(),
    Sweep(name="tune-add-block", op="add", variants=("f16x8", "f16x8_pack"), dtype="f16", shapes=((4096, 4096), (1024, 1024)),
          axes={"block": (64, 128, 256, 512, 1024)},
          description="tuning axis: threads per block of add f16x8 / f16x8_pack"),
    Sweep(name="tune-softmax-rows", op="softmax_rows", variants=("f16x8",), dtype="f16",
          shapes=((16384, 4096), (4096, 16384)), axes={"floats": (8, 16, 32), "threads": (256, 512, 1024)},
          description="tuning axes: row values per thread x threads per row of softmax_rows f16x8"),
    Sweep(name="tune-softmax-floats", op="softmax_rows", variants=("f16x8",), dtype="f16",
          shapes=((65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192)), axes={"floats": (16, 32)},
          modes=("cold", "rotating"),
          description="tuning axis: 16 or 32 row values a thread of softmax_rows f16x8 at K = 1024 ... 8192 (64 MiB "
          "a pass), where the row plan changes: the evidence for the 16-bit default (kernels/softmax.cu)"),
    # cold only: a compute-bound tile choice, and the zoo's sgemm sweep holds every state of the op
    Sweep(name="tune-sgemm", op="sgemm", variants=("tuned",), shapes=SGEMM_SHAPES, axes=SGEMM_TILES, modes=("cold",),
          description="tuning axes: 21 tiles of sgemm tuned (block, warp and thread tile, stages, block order) "
          "and its shipped one at the issue-25 shapes; the best per GPU is shipped (labkit.ops.sgemm.GPU_DEFAULTS)"),
]}


def get_sweep(name: str) -> Sweep:
    if name not in SWEEPS:
        raise ConfigError(f"unknown sweep {name!r}; sweeps are {', '.join(SWEEPS)}{suggest(name, SWEEPS)}")
    return SWEEPS[name]


def default_out(sweep_name: str) -> Path:
    """results/<gpu-slug>/<sweep>.jsonl for the first GPU of this run."""
    gpus = device.visible_gpus()
    if not gpus:
        raise NoGPUError(device.NO_GPU)
    return results_dir() / gpu_slug(gpus[0]["name"]) / f"{sweep_name}.jsonl"
