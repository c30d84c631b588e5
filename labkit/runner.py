"""Run one Config on this process's GPU: build, check, time, re-check, record.

Every timed run is checked first: outputs poisoned (NaN / complement), one run, every element
compared with a float64 reference. A variant that fails is recorded as failed, never timed. After
timing, the output of the last timed launch is compared with the reference again, so a kernel
that is right only on a poisoned buffer (or only once) fails too. Timed rows carry two clocks:
`time_us` (CUDA events, behind the blocking kernel) and `kernel_us` (CUPTI records of the row's first
groups, what Nsight reports, beside those launches' own event time `cupti_event_us`; labkit.cupti,
labkit.timing: time_us's samples follow with CUPTI off, which costs 0.1-0.6 µs a launch).
"""
from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor

from . import cache_states, ceilings, device, energy, launch
from .check import compare, poison
from .config import Config
from .errors import ConfigError, LabkitError, LaunchError
from .guard import of_row
from .launch import launcher_for, resolved
from .ranges import config_name, nvtx_range
from .stats import median_interval
from .timing import is_time, measure
from .verdicts import SAMPLES, compare_rows, keep_samples

HOST_BOUND_ABS_US = 0.5   # event time may exceed kernel time by the floor plus max(0.5 µs, 3 %)
HOST_BOUND_REL = 0.03


def host_bound(time_us, kernel_us, overhead_floor_us, kernels: int = 1) -> bool | None:
    """True when the event time exceeds the kernel's own time by more than the device's event
    overhead plus max(0.5 µs, 3 %): host time (or something else) leaked into the timed region.
    An op of several kernels (or memsets / copies) per call is allowed one more floor per further
    kernel: the GPU's own gap between dependent kernels, which events see and CUPTI does not."""
    if time_us is None or kernel_us is None or overhead_floor_us is None:
        return None
    return exceeds(time_us - kernel_us - overhead_floor_us * max(1, kernels or 1), kernel_us)


def exceeds(extra_us: float, base_us: float) -> bool:
    """`extra_us` beyond max(0.5 µs, 3 % of `base_us`): more than the timer's own scatter."""
    return extra_us > max(HOST_BOUND_ABS_US, HOST_BOUND_REL * base_us)


def _try_build(cfg) -> bool:
    try:
        launch.library_for(cfg.spec, cfg.variant, cfg.axes)
        return True
    except LabkitError:
        return False


class ContextLost(LabkitError):
    """The CUDA context of this process is unusable after a kernel fault (sticky error)."""


def context_ok() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


class Runner:
    """Runs Configs and keeps what a process needs between them: launchers, the torch baseline of
    each group (op, dtype, shape, mode, offset), the device's measured ceilings."""

    def __init__(self, peak: bool = True, kernel_time: bool = True, energy: bool = False):
        self.peak, self.kernel_time, self.energy = peak, kernel_time, energy
        self.baselines: dict = {}  # group -> the torch row later variants compare with (vs_torch)
        self.phase = lambda name: None  # a worker reports phases to its parent (hang detection)

    # ---- what a row is compared with -------------------------------------------------------------
    def facts(self) -> dict | None:
        if not self.peak:
            return None
        return ceilings.device_facts()

    def prebuild(self, configs: list) -> int:
        """Build the libraries a group of configurations needs, in parallel (a tuning sweep needs one
        per axis value: nvcc runs them side by side instead of one per configuration). A build that
        fails is left to its configuration's own run, which records the compile error."""
        # a launcher this process already holds needs nothing (a sweep's later groups)
        need = {(c.spec.name, c.variant, tuple(c.axes)): c for c in configs
                if not c.variant.is_torch and not resolved(c.spec, c.variant, c.axes)}
        if len(need) < 2:
            return 0
        self.phase("compile")
        with ThreadPoolExecutor(max_workers=min(len(need), os.cpu_count() or 2)) as pool:
            done = list(pool.map(_try_build, need.values()))
        return sum(done)

    # ---- one configuration ----------------------------------------------------------------------
    def run(self, cfg: Config) -> dict:
        """Check, then (if cfg.timed) time one configuration; returns its record. Bad input raises
        ConfigError; a kernel fault is a row with status 'error' (and ContextLost is raised after it
        when the process's CUDA context did not survive: the caller replaces the process)."""
        import torch

        device.require_gpu()
        op, v = cfg.spec, cfg.variant
        rec = {**cfg.head(), "bytes": op.cost.bytes_moved(cfg.shape, v.dtype), **dict(cfg.axes),
               **_rule_fields(cfg.rule), **device.provenance()}
        lost = None
        try:
            with nvtx_range(config_name(op.name, cfg.variant_s, cfg.shape_s, v.dtype if len(op.dtypes) > 1 else None)):
                rec.update(self._run(cfg))
        except torch.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            rec.update(status="error", error=f"out of GPU memory: {str(e).splitlines()[0]}")
        except ConfigError as e:  # this configuration cannot run here (memory, input limits): nvbench's skip
            rec.update(status="skipped", error=str(e))
        except (LabkitError, RuntimeError) as e:
            rec.update(status="error", error=str(e).strip().splitlines()[0], kernel=v.kernel or v.symbol)
            if isinstance(e, LaunchError) or "CUDA" in str(e) or "cuda" in str(e):
                if not context_ok():
                    lost = ContextLost(f"{cfg.describe()}: {rec['error']} - this process's CUDA context is lost")
        if lost is None:
            self._derive(cfg, rec)
        rec["context_lost"] = lost is not None
        if lost is not None:
            lost.record = rec
            raise lost
        return rec

    def _inputs(self, cfg: Config, sets: int = 1):
        """`sets` buffer sets [(inputs, outputs)] holding the same data (a rotating cache state cycles
        through them), and the seed of that data."""
        import torch

        op, v = cfg.spec, cfg.variant
        # inputs and outputs, a float64 reference of the outputs, the chunked comparison, other sets
        need = (2 + sets) * op.cost.bytes_moved(cfg.shape, v.dtype) + (1 << 30)
        free, total = torch.cuda.mem_get_info()
        if need > free:  # what torch's allocator holds cached for this process is free to it too
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
        if need > free:
            raise ConfigError(f"{op.name} {cfg.shape_s} ({sets} buffer set(s)) needs about {need / 2**30:.1f} GiB of "
                              f"GPU memory; {free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB are free")
        seed = zlib.crc32(f"{op.name} {v.dtype} {cfg.shape_s} {cfg.offset}".encode())  # same data in any process
        out = []
        for _ in range(sets):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            inputs = op.data.make_inputs(cfg.shape, v.dtype, gen, cfg.offset)
            out.append((inputs, op.data.make_outputs(inputs, cfg.shape, v.dtype, cfg.offset)))
        if op.data.validate:
            op.data.validate(out[0][0], cfg.shape, v.dtype)
        return out, seed

    def _run(self, cfg: Config) -> dict:
        import torch

        op, v, shape = cfg.spec, cfg.variant, cfg.shape
        self.phase("compile")
        with nvtx_range("compile"):
            launcher = None if v.is_torch else launcher_for(op, v, cfg.axes)
        self.phase("check")
        state = cache_states.get(cfg.mode)
        set_bytes = sum(op.cost.footprint(shape, v.dtype)) if op.cost.footprint else op.cost.bytes_moved(shape, v.dtype)
        nsets = state.sets(set_bytes, device.properties()["l2_bytes"]) if cfg.timed else 1
        sets, seed = self._inputs(cfg, nsets)
        launches = [_launch(op, v, launcher, shape, ins, outs) for ins, outs in sets]
        (inputs, outputs), go = sets[0], launches[0]

        rtol, atol = op.tol(shape, v.dtype, inputs)
        with nvtx_range("check"):
            refs = op.data.reference(inputs, shape, v.dtype)
            for _, outs in sets:  # every set: a set the timed launches never wrote fails the recheck
                for out, ref in zip(outs, refs):
                    poison(out, ref)
            path = go()
            torch.cuda.synchronize()
            results = [compare(o, r, rtol, atol, f"output {k}") for k, (o, r) in enumerate(zip(outputs, refs))]
            del refs
        base = {"path": "torch" if v.is_torch else ("fallback" if path == 1 else "vector"), "seed": seed,
                "max_abs_err": max(r.max_abs_err for r in results)}
        bad = [r for r in results if not r.ok]
        if bad:
            return {**base, "status": "failed", "error": bad[0].message}
        if not cfg.timed:
            return {**base, "status": "ok"}

        self.phase("timed")
        timer = energy.measure if self.energy else measure  # energy: timing, then the launches back to back
        m = timer(launches, mode=cfg.mode, rule=cfg.rule, ranges=True, kernels=self.kernel_time)
        with nvtx_range("recheck"):
            torch.cuda.synchronize()
            refs = op.data.reference(inputs, shape, v.dtype)  # every set holds the same inputs
            again = [compare(o, r, rtol, atol, f"output {k}{f' of set {j}' if j else ''} after timing")
                     for j, (_, outs) in enumerate(sets) for k, (o, r) in enumerate(zip(outs, refs))]
            del refs
        worse = [r for r in again if not r.ok]
        if worse:
            return {**base, "status": "failed", "recheck": "failed",
                    "error": f"right when checked, wrong after {m.summary.n * m.batch} timed launches: {worse[0].message}"}
        return {**base, "status": "ok", "recheck": "ok", **_timing_fields(m)}

    # ---- derived fields -------------------------------------------------------------------------
    def _derive(self, cfg: Config, rec: dict) -> None:
        op, v = cfg.spec, cfg.variant
        if rec.get("status") != "ok" or "time_us" not in rec:
            return
        t, k = rec["time_us"] * 1e-6, rec.get("kernel_us")
        rec["gbps"] = rec["bytes"] / t / 1e9
        flops = op.cost.flops(cfg.shape, v.dtype) if op.cost.flops else None
        if flops:
            rec["flops"] = flops
            rec["tflops"] = flops / t / 1e12
            rec["intensity"] = flops / rec["bytes"]  # flops per byte moved, the roofline's x
        facts = self.facts()
        if facts:
            rec["peak_gbps"] = facts["copy_peak_gbps"]
            rec["peak_ref"] = facts["ref"]
            rec["pct_peak"] = 100 * rec["gbps"] / facts["copy_peak_gbps"]
            if facts.get("fma_tflops") and flops:
                rec["pct_fma"] = 100 * rec["tflops"] / facts["fma_tflops"]
            floor = facts.get("floor", {}).get(cfg.mode, {})
            rec["floor_us"] = floor.get("overhead_us")
        spec = facts.get("spec", {}) if facts else {}
        if spec.get("mem_gbps"):
            rec["spec_gbps"] = spec["mem_gbps"]
            rec["pct_spec"] = 100 * rec["gbps"] / spec["mem_gbps"]
        if k:
            rec["overhead_us"] = rec["time_us"] - k
            rec["kernel_gbps"] = rec["bytes"] / (k * 1e-6) / 1e9
            # a graph sample is one launch: no host time can enter it, the gap is the GPU's own (e.g. a
            # memset node before the kernel, ~1.3 µs on an H100)
            rec["host_bound"] = (None if cache_states.get(cfg.mode).graph else
                                 host_bound(rec["time_us"], k, rec.get("floor_us"), rec.get("kernels") or 1))
        if rec.get("cupti_event_us"):
            # CUPTI's phase runs the same launches slower where its records cost (0.1-0.6 µs a launch) or
            # the kernel itself slows under it (relu f16 scalar 16384^2: +11 %, H100): kernel_us is of those
            rec["cupti_slowdown"] = 100 * (rec["cupti_event_us"] / rec["time_us"] - 1)
            rec["cupti_slowed"] = exceeds(rec["cupti_event_us"] - rec["time_us"], rec["time_us"])
        # the physics guard: the DRAM traffic this time implies against the datasheet (labkit.guard)
        found = of_row(rec, facts or {"l2_bytes": device.properties()["l2_bytes"]})
        rec.update({key: x for key, x in found.items() if x is not None})
        if rec.get("energy_per_launch_j"):
            rec["gb_per_j"] = rec["bytes"] / 1e9 / rec["energy_per_launch_j"]
        if v.is_torch:
            self.baselines[cfg.group] = {k: rec.get(k) for k in ("time_us", "kernel_us", SAMPLES)}
        else:
            base = self.baselines.get(cfg.group)
            if base:
                rec["torch_us"], rec["torch_kernel_us"] = base["time_us"], base.get("kernel_us")
                rec["vs_torch"] = rec["time_us"] / base["time_us"]
                if k and base.get("kernel_us"):
                    rec["vs_torch_kernel"] = k / base["kernel_us"]
                vs = compare_rows(rec, base)
                if vs:
                    rec.update(vs_torch_lo=vs.lo, vs_torch_hi=vs.hi, vs_torch_verdict=vs.verdict)


def _launch(op, v, launcher, shape, inputs, outputs):
    """One buffer set's launch: the torch baseline's call, or the variant's launcher packed once."""
    if v.is_torch:
        return lambda: op.data.torch_impl(inputs, outputs, shape, v.dtype)
    ints, floats = op.params(shape, v.dtype)
    return launcher.prepare([*inputs, *outputs], ints, floats)


def _rule_fields(rule) -> dict:
    return {"noise_target": rule.noise_target, "budget_s": rule.budget_s, "max_samples": rule.max_samples}


def _timing_fields(m) -> dict:
    s = m.summary
    if not is_time(s.median):  # an error row, never a NaN or an infinity in a table
        return {"status": "error", "error": f"the timer gave {s.median} s as the median of {s.n} samples: "
                                            "not a measurement", "samples": s.n, "stop_reason": m.stop_reason}
    ci = median_interval(m.samples_s)
    out = {"time_us": s.median * 1e6, "q1_us": s.q1 * 1e6, "q3_us": s.q3 * 1e6, "min_us": s.min * 1e6,
           "max_us": s.max * 1e6, "ci_lo_us": ci.lo * 1e6, "ci_hi_us": ci.hi * 1e6, SAMPLES: keep_samples(m.samples_s),
           "samples": s.n, "noise": s.noise, "stop_reason": m.stop_reason,
           "converged": m.stop_reason == "converged", "method": m.method, "batch": m.batch,
           "samples_per_group": m.group, "blocking": m.blocking,
           "block_timeouts": m.timeouts, "sm_clock_mhz": m.sm_clock_mhz, "throttled": m.throttled}
    if cache_states.get(m.mode).rotate:
        out["buffer_sets"] = m.sets
    if m.kernels:  # the same samples' kernels (labkit.cupti): kernel_us, kernels, overlap_us, cupti
        out.update(m.kernels)
    if m.energy:
        e = m.energy
        out["nvml"] = e.get("nvml")
        for k in ("power_w", "energy_per_launch_j", "energy_launch_us", "counter_step_ms", "counter_read_ms",
                  "sm_clock_min_mhz", "temp_max_c", "energy_source", "energy_scope"):
            if k in e:
                out[k] = e[k]
    return out
