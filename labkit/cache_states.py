"""Cache states: what the L2 holds when a sample's start event fires, one class each (nvbench's
measurement classes are the model). A class declares

* `name` (the row's `mode`), `description` (one line) and `setup` (how a sample is set up);
* `flush`: "read" (a read of twice the L2 size: clean lines left) or "write" (a write of it: dirty
  lines left), run before each sample's start event, outside the timed region; None for none;
* `graph`: a sample is a CUDA graph of back-to-back launches and the row's time is per launch;
* `rotate`: the launches cycle through buffer sets whose total is >= ROTATE_L2 x the L2 (`sets`);
* `group`: samples enqueued per blocked group (labkit.timing); GRAPH_GROUP for a graph state;
* `dram(reads, writes, l2_bytes, sets)`: the bytes that must cross DRAM inside the timed region per
  launch, (read part, write part), from the op's footprint (labkit.guard turns it into a row's flag);
  `reads_dram()` follows from it: the inputs cross DRAM whatever the L2 size (a DRAM goal applies).

`@register` puts a class into STATES, which the CLI's choices, Config validation, the explorer's
buttons, the tables and the labs read: adding a state is a class here and nothing else.
"""
from __future__ import annotations

import math

from .errors import ConfigError
from .spec import suggest

ROTATE_L2 = 3      # rotating buffer sets total at least 3x the L2
MAX_SETS = 1024    # a bound on buffer sets (launchers, graph nodes) for tiny configurations
# one graph launch per blocked group: a second launch of a graph holding a memset node (torch.sum,
# dot's and histogram's zeroing) blocks the host until the first has run, which behind the blocking
# kernel is never: same exec or another, H100 2026-11-24
# (graph-memset*.log in results/nvidia-h100-80gb-hbm3/logs/65d0dca541d9/)
GRAPH_GROUP = 1

STATES: dict = {}


def register(cls):
    """Class decorator: one instance of `cls` in STATES under its name (registration order kept)."""
    if cls.graph and cls.group != GRAPH_GROUP:
        raise ValueError(f"cache state {cls.name!r}: a graph state enqueues {GRAPH_GROUP} sample(s) per blocked "
                         f"group (GRAPH_GROUP), not {cls.group}")
    STATES[cls.name] = cls()
    return cls


def names() -> tuple:
    """The registered states' names, in registration order (the CLI's choices, the explorer's buttons)."""
    return tuple(STATES)


def get(name: str) -> "CacheState":
    """The state called `name`, or a ConfigError naming the states there are."""
    if not isinstance(name, str) or name not in STATES:
        raise ConfigError(f"unknown cache mode {name!r}; modes are {', '.join(STATES)}{suggest(name, STATES)}")
    return STATES[name]


def check(name: str) -> str:
    return get(name).name


def ordered(modes) -> list:
    """The distinct names in `modes` (e.g. the modes of recorded rows) in registration order, names not
    registered after them, sorted: the order tables and the explorer show the states in."""
    order = names()
    return sorted(set(modes), key=lambda m: (order.index(m) if m in order else len(order), str(m)))


def from_dram(modes=None) -> tuple:
    """Of `modes` (default: every registered state), those whose inputs cross DRAM whatever the L2 size
    (CacheState.reads_dram), in registration order: where a time can be judged against the DRAM copy
    peak. Unknown names are left out."""
    want = names() if modes is None else set(modes)
    return tuple(n for n, s in STATES.items() if n in want and s.reads_dram())


def describe() -> str:
    """'name: description' per state, one a line (CLI help, labkit list)."""
    return "\n".join(f"{s.name}: {s.description}" for s in STATES.values())


class CacheState:
    name = ""
    description = ""
    setup = ""
    flush: str | None = None
    graph = False
    rotate = False
    # an event sample with 4 or more samples enqueued behind it read 0.3-0.6 µs longer (why is not
    # known; an idle gap after the flush does not change it): in groups of 16 the first 12 did, the
    # last 4 not, groups of 1-4 none; nvbench enqueues one (add f16 1024²-4096²,
    # results/nvidia-h200/logs/c082e2685288/probe-pos.log, H100 logs/9b25e3654f43/probe-pos.log)
    group = 4

    def sets(self, set_bytes: int, l2_bytes: int | None) -> int:
        """Buffer sets a configuration of `set_bytes` (inputs + outputs) needs here."""
        return 1

    def dram(self, reads: float, writes: float, l2_bytes: float | None, sets: int = 1) -> tuple:
        """(read bytes, written bytes) that must cross DRAM inside the timed region, per launch."""
        raise NotImplementedError

    def reads_dram(self) -> bool:
        """True where the inputs cross DRAM inside the timed region whatever the L2 size (a flushed L2,
        rotating buffers); False where they may stay in L2 (hot: back-to-back launches on one buffer set)."""
        return sum(self.dram(1.0, 0.0, None)) > 0

    def __repr__(self) -> str:
        return f"<cache state {self.name}>"


def _beyond_l2(reads, writes, l2):
    """Back-to-back launches on a working set of reads + writes: at most an L2's worth stays there
    between launches, so at least the rest crosses DRAM (taken from the reads first)."""
    if not l2:
        return 0.0, 0.0
    extra = max(0.0, reads + writes - l2)
    return min(reads, extra), max(0.0, extra - reads)


@register
class Cold(CacheState):
    name = "cold"
    description = "clean L2: the inputs come from DRAM; output may stay in L2 and be written back after the stop event"
    setup = "a read of twice the L2 size before each sample's start event, one launch per sample"
    flush = "read"

    def dram(self, reads, writes, l2_bytes, sets=1):
        # inputs: not in L2 after the flush; outputs: clean lines are dropped for free, so only what
        # does not fit in the L2 must be written back before the stop event
        return reads, (max(0.0, writes - l2_bytes) if l2_bytes else 0.0)


@register
class ColdDirty(CacheState):
    name = "cold-dirty"
    description = ("L2 full of dirty lines (what nvbench's and triton's flushes leave): the inputs come "
                   "from DRAM and every line the kernel allocates evicts a dirty one")
    setup = "a write of twice the L2 size before each sample's start event, one launch per sample"
    flush = "write"

    def dram(self, reads, writes, l2_bytes, sets=1):
        # each allocated line (input or output) writes a dirty line back: at least writes' worth
        return reads, writes


@register
class Rotating(CacheState):
    name = "rotating"
    description = ("steady-state streaming: back-to-back launches over buffer sets totalling >= 3x the L2, "
                   "so inputs are cold and earlier outputs are written back (CUTLASS --workspace-count)")
    setup = "a CUDA graph of back-to-back launches, each on the next of several input/output sets"
    graph = True
    rotate = True
    group = GRAPH_GROUP

    def sets(self, set_bytes, l2_bytes):
        if not l2_bytes or set_bytes <= 0:
            return 1
        return max(1, min(MAX_SETS, math.ceil(ROTATE_L2 * l2_bytes / set_bytes)))

    def dram(self, reads, writes, l2_bytes, sets=1):
        if l2_bytes and sets * (reads + writes) < ROTATE_L2 * l2_bytes:  # capped sets: part may stay in L2
            r, w = _beyond_l2(sets * reads, sets * writes, l2_bytes)
            return r / sets, w / sets
        return reads, writes


@register
class Hot(CacheState):
    name = "hot"
    description = "warm L2: back-to-back launches on the same buffers; a working set that fits stays in L2"
    setup = "a CUDA graph of back-to-back launches on one buffer set (~2 ms a sample)"
    graph = True
    group = GRAPH_GROUP

    def dram(self, reads, writes, l2_bytes, sets=1):
        return _beyond_l2(reads, writes, l2_bytes)
