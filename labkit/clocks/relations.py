"""What each harness's number should be next to another's, and why: the relations stated once, as
data, and checked on one configuration's rows. No GPU and no torch here: the recorded files are
judged by the same code as a live run.

A row is one number of one harness: {"harness", "measure", "clock", "median_us", "samples", "note"}
(labkit: measure = a cache state, clock "events", "CUPTI", "CUPTI events", "idle" (hot's graph
replayed on an idle GPU), "untraced" (hot in a process without CUPTI) or "twin" (CUPTI in the run
of Nsight Systems' command without nsys) or "nvbench" (cold-dirty on nvbench's buffers, in its process); nvbench: "cold" / "batch"; triton: "do_bench" / "do_bench_cudagraph";
nsys: a cache state, clock "nsys"). A row without a number says
why in its note ("not installed ...", an error). Its label ("labkit cold", "labkit cold CUPTI",
"nvbench cold", "triton do_bench", "nsys hot") is what a relation names; "{state}" in a relation
stands for every cache state labkit measured (or those of them the relation lists in `over`), so a
state added to labkit's registry is reconciled without an edit here."""
from __future__ import annotations

from dataclasses import dataclass, replace

STATE = "{state}"


@dataclass(frozen=True)
class Relation:
    a: str          # row labels
    b: str
    kind: str       # "≈": |a/b - 1| <= tol;  "≤": a <= b * (1 + tol)
    tol: float
    reason: str
    over: tuple = ()  # the states {state} stands for (default: every state measured)

    @property
    def expected(self) -> str:
        """'a ≈ b ± 3 %', 'a ≤ b + 1 %', 'a ≤ b' (and which states {state} stands for, if not all)."""
        tol = f" {'±' if self.kind == '≈' else '+'} {100 * self.tol:g} %" if self.tol else ""
        over = f" for {STATE} in {', '.join(self.over)}" if self.over and STATE in self.a + self.b else ""
        return f"{self.a} {self.kind} {self.b}{tol}{over}"

    def holds(self, a_us: float, b_us: float) -> tuple[bool, float]:
        """(whether it holds, a/b - 1)."""
        d = a_us / b_us - 1
        return (abs(d) <= self.tol if self.kind == "≈" else d <= self.tol), d


RELATIONS = (
    Relation("labkit cold-dirty", "nvbench cold", "≈", 0.03,
             "both start each launch with L2 full of dirty lines (nvbench memsets an L2-sized buffer), so the "
             "kernel pays for writing them back inside its events; both time one launch behind a blocking kernel, "
             "and labkit's event samples come after its CUPTI samples (CUPTI's cost is not in them). Before "
             "9b25e3654f43 labkit enqueued 16 samples a blocked group, and a sample with 4 or more queued behind "
             "it read 0.3-0.6 µs late (H200 logs/c082e2685288/probe-pos.log, H100 logs/9b25e3654f43/probe-pos.log): labkit then read up to "
             "+10.6 % above nvbench at 1024² and +5 % at 2048². With 4 a group (labkit.cache_states) the two "
             "processes still place their buffers differently, which moves a short cold-dirty kernel by up to "
             "8-11 % at 1024² (logs/14a09f5edc18/placement.log); the next relation times labkit on nvbench's buffers"),
    Relation("labkit cold-dirty on nvbench's buffers", "nvbench cold", "≈", 0.03,
             "the same launches on the same buffers in nvbench's process (labkit.clocks.nvbench_child): labkit's "
             "cold-dirty timed there before and after nvbench's measurements, without CUPTI, so where the buffers "
             "sit is the same for both and what is left is each harness's own flush and timing: within 1.6 % at "
             "every size on both GPUs at 9b25e3654f43; with 16 samples a group it had read +6.2 / +6.7 % at 1024² "
             "and +3.1 / +3.2 % at 2048² (H200, logs/c082e2685288/reconcile-group16.json), so placement was not "
             "that gap's cause"),
    Relation("labkit hot", "triton do_bench_cudagraph", "≈", 0.02,
             "both replay a CUDA graph of back-to-back launches with no flush and divide its event time by the "
             "launches; triton's runs in a child process that never ran CUPTI (labkit.clocks.graph_child: once "
             "torch.profiler has run, each graph node costs the host ~0.47 µs at launch, and a replay started "
             "on an idle GPU, as triton's is, waits for it). At <= 2048² the two processes can read different "
             "states of the GPU's launch pipeline: back-to-back 2 µs kernels overlap their predecessor's end or "
             "leave a gap (H100 add f16 1024²: 1.72-1.81 or 1.91-1.98 µs a launch, CUPTI's kernel 1.82 µs in "
             "both), and all graphs of a process read the same state, old ones too (logs/a819a714ccd0/pace10.log). "
             "The SM clock stays at 1980 MHz in both, and idle gaps of 0-5 s do not end the overlap "
             "(f0358817f372/pace14.log). A CUPTI-free process goes to the gap state for good once it replays a "
             "graph behind pending work (labkit's blocking kernel or its spin) after instantiating a third graph "
             "(torch's captures or labkit's: f0358817f372/pace16.log); replays on an idle stream, flushes, "
             "empty_cache and dropped captures do not move it (pace15.log). labkit's hot in the reconcile's "
             "process, which ran CUPTI, has read the overlap state, triton's child the gap state from its first "
             "round (which that rule does not explain). This row has read 5-14 % below triton's at <= 2048² in "
             "every reconcile; measured in turn in one process the two agree: the next relation"),
    Relation("labkit hot without CUPTI", "triton do_bench_cudagraph", "≈", 0.02,
             "the same Subject in the same process, one that never ran CUPTI, measured in turn over 3 rounds "
             "(each the median of its rounds): labkit's hot graph behind its blocking kernel, triton's started "
             "on an idle GPU. The process can change state between rounds: on the H200 at d8354da36391 (torch "
             "1024²) labkit read 1.792, 1.790, 1.877 and triton 1.807, 1.889, 1.914 µs, the first round's pair "
             "0.8 % apart, the medians 5.1 %"),
    Relation("labkit hot on an idle GPU", "triton do_bench_cudagraph", "≈", 0.03,
             "the same measurement in the same process: a graph of back-to-back launches started with nothing "
             "queued ahead, events around the replay; only the graph's length differs (labkit's ~2 ms, "
             "triton's ~20 ms)"),
    Relation("labkit hot without CUPTI", "labkit hot on an idle GPU", "≤", 0.01,
             "the same graph in the same process: behind the blocking kernel all of it is submitted before it "
             "starts, while a replay started on an idle GPU can wait for the host's submission: +0.5-2 % in a "
             "process without CUPTI, +25 % at 1024² once torch.profiler had run in it (H100 add f16: 1.91 vs "
             "2.38 µs a launch, logs/384094ebd7be/graph_state.log)"),
    Relation("labkit hot", "nvbench batch", "≈", 0.03,
             "both time back-to-back launches with no flush; nvbench enqueues them one by one behind its blocking "
             "kernel and reports the mean, labkit replays a graph and reports the median. Through cuda-bench "
             "0.3.0's Python API nvbench's batch reads 18-30 µs a launch whatever the kernel (add f16 1024² and "
             "2048² on both GPUs): there it times the Python launcher, not the kernel; it agrees from kernels of "
             "~90 µs (8192²)"),
    Relation(f"labkit {STATE} CUPTI, same allocations as nsys", f"nsys {STATE}", "≈", 0.02,
             "the same CUPTI records of the same kernels (start and end on the GPU) in two runs of one command "
             "(labkit.nsight.profile): under Nsight Systems, then without it with labkit's CUPTI phase. Both make "
             "the same allocations in the same order, so their buffers sit at the same places (CUPTI over 2 or 40 "
             "groups and Nsight Systems read add f16 1024² and 2048² cold-dirty within 0.4 % on both GPUs, "
             "logs/14a09f5edc18/cupti-vs-nsys-same-layout.log). labkit's CUPTI reads 32 launches of an event "
             "state (one graph replay, ~2 ms of launches), Nsight Systems all of them: at 9b25e3654f43 (two "
             "replays) 38 of 40 within 2 % on the H100 (torch 1024² cold +2.1, hot +2.3 %), 37 of 40 on the H200 "
             "(1024² rotating +2.1, torch 2048² cold-dirty -2.3, torch 4096² hot +2.1 %); with one replay at "
             "152fa4709bd7 36 of 40 on the H200 (torch 1024² cold -2.3, f16x8_pack 2048² hot -2.2, torch 2048² "
             "cold-dirty -2.3, torch 4096² rotating +2.0 %: logs/152fa4709bd7/call2/reconcile.log) and 36 at "
             "d8354da36391 (torch 1024² rotating +2.8, hot +2.6, torch 2048² cold-dirty -2.3, torch 4096² hot "
             "+2.2 %)"),
    Relation(f"labkit {STATE} CUPTI", f"labkit {STATE} CUPTI, same allocations as nsys", "≈", 0.02,
             "the same clock in two processes that allocate differently (the reconcile's allocates other "
             "states' and harnesses' buffers first), and a short kernel's time depends on where its buffers sit: "
             "the same add f16 1024² at 16 placements spans 3.33-3.68 µs cold-dirty on the H200 and 4.13-4.48 µs "
             "on the H100 (8-11 %; 2048² 5-8 %, cold <= 6 %), each placement the same to ~1 % in a second process "
             "(logs/14a09f5edc18/placement.log). So at <= 2048² cold and cold-dirty this can miss by up to that "
             "spread without either clock being wrong: 1024² cold-dirty reads 3.7 / 5.9 % below on the H100 and "
             "4.4 / 5.8 % above on the H200 (9b25e3654f43), as it read against Nsight Systems before the "
             "relation above was measured on the same allocations (bb508c55727d, 6fa2b3014996, 6931c2d80f40)"),
    Relation(f"labkit {STATE} CUPTI", f"labkit {STATE} under CUPTI", "≤", 0.0,
             "the same launches: the events bracket the kernel and the launch's own overhead, so the kernel's own "
             "time cannot exceed the event time of a launch that runs alone (a graph's back-to-back launches "
             "overlap, by up to 0.6 % of a launch at 2048² on the H200: not compared)",
             over=("cold", "cold-dirty")),
    Relation(f"labkit {STATE} under CUPTI", f"labkit {STATE}", "≈", 0.03,
             "the same configuration's launches with CUPTI recording them (the row's first groups) and without "
             "(time_us): CUPTI's record of a kernel costs 0.1-0.6 µs a launch, and some kernels run slower under "
             "it: relu f16's scalar kernel at 16384² by 11-12 % on both GPUs, where Nsight Systems' durations "
             "agree with labkit's CUPTI time and nvbench's untraced cold with labkit's events (H200 "
             "reconcile-relu.json). Where this does not hold, a profiler's kernel time is of slowed launches "
             "(the row says cupti_slowed). In the reconciles at 9b25e3654f43 the CUPTI phase enqueued 4 samples "
             "a group, and its marker kernels made them read late (+4-12 % at <= 2048²); it enqueues one since "
             "4273467deb48 (H100 add f16 1024² cold and cold-dirty -0.6 to +7.1 % (0.4 µs), from 2048² <= 1 %: "
             "logs/4273467deb48/cupti-phase.log)"),
    Relation("labkit cold", "labkit cold-dirty", "≤", 0.01,
             "cold's read flush leaves clean lines: the kernel's writes can stay dirty in L2 and be written back "
             "after the stop event; cold-dirty starts with dirty lines, whose eviction the kernel pays inside"),
    Relation("labkit cold CUPTI", "labkit rotating CUPTI", "≤", 0.01,
             "rotating reads inputs that are not in L2, as cold does, and also pays for writing back the outputs "
             "of earlier launches; compared on kernel time, since a cold launch's events also hold its launch "
             "latency (~3 µs) and rotating's launches run back to back in a graph"),
    Relation("triton do_bench", "nvbench cold", "≈", 0.03,
             "both flush with writes (do_bench zeroes 256 MB) and time one launch between events; do_bench has no "
             "blocking kernel, so host time between its start event and the launch lands inside whenever the "
             "GPU runs out of queued work: the 256 MB zero_ ahead of each launch keeps a fast host ahead, a "
             "slow or busy host shows up as do_bench > nvbench cold"),
)


# labkit's clocks besides its events
SUFFIX = {"CUPTI": " CUPTI", "CUPTI events": " under CUPTI", "idle": " on an idle GPU", "untraced": " without CUPTI",
          "twin": " CUPTI, same allocations as nsys", "nvbench": " on nvbench's buffers"}


def label(row: dict) -> str:
    return f"{row['harness']} {row['measure']}" + SUFFIX.get(row["clock"], "")


def states(rows) -> list:
    """The cache states labkit measured, in its registry's order."""
    return list(dict.fromkeys(r["measure"] for r in rows if r["harness"] == "labkit"))


def expand(relations, names) -> list:
    """Each relation that names {state} once per state in `names` (that it is stated for); the
    others as they are."""
    out = []
    for rel in relations:
        if STATE in rel.a or STATE in rel.b:
            out += [replace(rel, a=rel.a.replace(STATE, s), b=rel.b.replace(STATE, s), over=())
                    for s in names if not rel.over or s in rel.over]
        else:
            out.append(rel)
    return out


def _missing(name: str, row: dict | None) -> str | None:
    if row is None:
        return f"n/a: '{name}' was not measured"
    if row.get("median_us") is None:
        return f"n/a: {name}: {row.get('note') or 'no number'}"
    return None


def verdicts(rows, relations=RELATIONS) -> list:
    """One verdict per relation (expanded over the measured states): both numbers, the difference
    a/b - 1 in %, whether it holds, and the reason."""
    by = {label(r): r for r in rows}
    out = []
    for rel in expand(relations, states(rows)):
        a, b = by.get(rel.a), by.get(rel.b)
        v = {"expected": rel.expected, "a_us": a and a.get("median_us"), "b_us": b and b.get("median_us"),
             "diff_pct": None, "holds": None, "reason": rel.reason}
        gap = _missing(rel.a, a) or _missing(rel.b, b)
        if gap:
            v["verdict"] = gap
        else:
            ok, d = rel.holds(a["median_us"], b["median_us"])
            v.update(diff_pct=100 * d, holds=ok, verdict=f"{'holds' if ok else 'does not hold'} ({100 * d:+.1f} %)")
        out.append(v)
    return out
