"""The timed launches' own kernel durations, from CUPTI activity records (torch's profiler, kineto, or
on request NVIDIA's cupti-python; `backend`): what Nsight Systems reports, for the very launches the
events time.

While CUPTI records the timed loop, every sample is bracketed by two empty marker kernels of the
harness (lk_mark_begin before the start event, lk_mark_end after the stop event: outside the timed
region), so the device records between a begin and an end marker are that sample's kernels (and
memsets / copies), whatever a flush or the blocking kernel launched around them. Events are not in
CUPTI's records; the markers tie the two clocks together by order on the one stream.

* cold states (one launch per sample): kernel time <= event time in every sample by construction;
  a sample where it is not means the records were not matched, and the row says `cupti: failed: ...`;
* graph states (back-to-back launches): per-launch kernel time, and `overlap_us`, how much the
  launches' recorded durations overlap one another (positive) or leave gaps (negative), per launch:
  a graph's event time per launch can be below the sum of its kernels' durations.
"""
from __future__ import annotations

import os
import statistics
import warnings

from .errors import ConfigError, ToolMissingError
from .launch import harness_launcher

BEGIN, END = "lk_mark_begin", "lk_mark_end"


def cupti_free() -> bool:
    """False under Nsight Systems / Compute: they inject into the CUDA driver
    (CUDA_INJECTION64_PATH) and hold CUPTI, and their own times are then the record."""
    return not os.environ.get("CUDA_INJECTION64_PATH")


class Probe:
    """CUPTI over a timed loop: `with Probe() as p:` around it, p.begin() / p.end() around each
    sample's events; afterwards p.records holds (name, start_ns, duration_ns) of every device
    record, or None with p.error saying why."""

    def __init__(self):
        import torch

        self._backend, self.records, self.error = None, None, None
        try:
            self._begin = harness_launcher(BEGIN).prepare([])
            self._end = harness_launcher(END).prepare([])
            # loaded now: a lazily loaded kernel must not be loaded while the blocking kernel holds the GPU
            self.begin(), self.end()
            torch.cuda.current_stream().synchronize()
        except Exception as e:  # no toolkit to build the harness, ...: the rows say so, timing goes on
            self.error = f"no marker kernels ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
            self._begin = self._end = lambda: 0

    def begin(self) -> None:
        self._begin()

    def end(self) -> None:
        self._end()

    def __enter__(self) -> "Probe":
        if self.error:
            return self
        try:
            self._backend = backend()
            self._backend.start()
        except Exception as e:  # CUPTI held by another tool, no kineto in this build, ...
            self._backend = None
            self.error = f"the profiler did not start ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        import torch

        if self._backend is None:
            return False
        torch.cuda.current_stream().synchronize()
        try:
            records = self._backend.stop()
            if exc_type is None:
                self.records = records
        except Exception as e:
            self.error = f"the profiler did not stop cleanly ({type(e).__name__}: {e})"
        return False


BACKENDS = ("kineto", "cupti-python")


def backend():
    """CUPTI's activity records through torch's profiler (kineto), or with LABKIT_CUPTI=cupti-python
    through NVIDIA's cupti-python (`pip install cupti-python`, its CUDA major the driver's): not the
    default, it cost a sweep more (kernel-time-cost +52.7 % against kineto's +21.8 %, H200,
    results/nvidia-h200/logs/bba28cd2ea79/call6). A Probe turns the errors into the rows'
    `cupti: failed: ...`, and timing goes on."""
    want = os.environ.get("LABKIT_CUPTI") or "kineto"
    if want not in BACKENDS:
        raise ConfigError(f"LABKIT_CUPTI={want!r}: the CUPTI backend is one of {', '.join(BACKENDS)}")
    if want == "kineto":
        return Kineto()
    try:
        from cupti import cupti  # cupti-python's API is its package's `cupti` module (NVIDIA's samples do this)
    except ImportError:
        raise ToolMissingError("LABKIT_CUPTI=cupti-python needs NVIDIA's cupti-python "
                               "(`pip install cupti-python`, of the driver's CUDA major)") from None
    return Activity(cupti)


class Kineto:
    """torch's profiler, CUDA activity only. Its start, stop and record reading cost 10-13 ms a timed
    loop on the H200 host (`results/nvidia-h200/logs/92c28cd/cupti-cost.log`)."""

    name = "kineto"

    def start(self) -> None:
        from torch.autograd.profiler import profile

        # through torch.autograd.profiler: torch.profiler.profile's first start checks
        # hasattr(torch, "_inductor"), which imports inductor, dynamo and sympy (4.7 s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._prof = profile(use_device="cuda", use_cpu=False, use_kineto=True)
            self._prof.__enter__()

    def stop(self) -> list:
        with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle
            warnings.simplefilter("ignore")
            self._prof.__exit__(None, None, None)
        return _device_records(self._prof)


class Activity:
    """CUPTI's activity API itself (cupti-python): the kernel, memcpy and memset kinds enabled around
    the timed loop, one forced flush after it, the records kept as they complete. Its callbacks are
    registered once a process; a profiler that registers its own later (torch's) takes the records,
    and the rows then say the markers did not pair up."""

    name = "cupti-python"
    _records: list = []
    _registered = False

    def __init__(self, cupti):
        self._c = cupti
        self._kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)

    @staticmethod
    def _requested():
        return 8 << 20, 0  # bytes a buffer, no record limit

    @classmethod
    def _completed(cls, activities) -> None:
        for a in activities:  # copied out now: the buffer is reused after the callback
            name = getattr(a, "name", None) or getattr(a, "kind", "record")
            cls._records.append((str(name), a.start, a.end - a.start))

    def start(self) -> None:
        if not Activity._registered:
            self._c.activity_register_callbacks(Activity._requested, Activity._completed)
            Activity._registered = True
        Activity._records.clear()
        try:
            for k in self._kinds:
                self._c.activity_enable(k)
        except Exception:  # none left on: the loop after it must run without CUPTI
            self._disable()
            raise

    def stop(self) -> list:
        try:
            self._c.activity_flush_all(1)  # forced: every record of the loop, completed or not
        finally:
            self._disable()
        out = list(Activity._records)
        Activity._records.clear()
        return out

    def _disable(self) -> None:
        for k in self._kinds:
            try:
                self._c.activity_disable(k)
            except Exception:  # a kind that was not on
                pass


def _device_records(prof) -> list:
    """(name, start_ns, duration_ns) of the CUDA device records: kineto's raw records, not
    prof.events(), which builds a FunctionEvent tree of every runtime call (milliseconds a sweep pays
    for nothing)."""
    from torch.autograd import DeviceType

    return [(e.name(), e.start_ns(), e.duration_ns()) for e in prof.kineto_results.events()
            if e.device_type() == DeviceType.CUDA]


def split(records) -> list | None:
    """Per begin/end marker pair, in stream order: (summed duration µs, records, span µs from the
    first start to the last end). None when the markers do not pair up (records lost)."""
    out, cur = [], None
    for name, start, dur in sorted(records, key=lambda r: r[1]):
        if BEGIN in name:
            if cur is not None:
                return None
            cur = []
        elif END in name:
            if cur is None:
                return None
            out.append(cur)
            cur = None
        elif cur is not None:
            cur.append((start, dur))
    if cur is not None:
        return None
    return [(sum(d for _, d in c) * 1e-3, len(c), (max(s + d for s, d in c) - min(s for s, _ in c)) * 1e-3 if c else 0.0)
            for c in out]


def per_launch(probe: Probe, samples_s: list, kept: list, batch: int, graph: bool) -> dict:
    """The row's CUPTI fields from a probe's records and the loop's samples (seconds per launch, the
    kept ones) and keep flags (per enqueued sample): kernel_us and kernels per launch (medians over
    the samples), overlap_us for graph states, and `cupti` ('same-launch', or 'failed: why')."""
    if probe.records is None:
        return {"cupti": f"failed: {probe.error or 'no records'}"}
    pairs = split(probe.records)
    if pairs is None:
        return {"cupti": "failed: the marker kernels did not pair up (records lost?)"}
    if len(pairs) != len(kept):
        return {"cupti": f"failed: {len(pairs)} samples in the CUPTI records, {len(kept)} enqueued"}
    pairs = [p for p, k in zip(pairs, kept) if k]
    if not pairs or any(n == 0 for _, n, _ in pairs):
        return {"cupti": "failed: a sample without kernel records"}
    kern = [k / batch for k, _, _ in pairs]  # µs per launch
    out = {"cupti": "same-launch", "kernel_us": statistics.median(kern),
           "kernels": round(statistics.median(n for _, n, _ in pairs) / batch)}
    if graph:
        out["overlap_us"] = statistics.median((k - span) / batch for k, _, span in pairs)
        return out
    over = sum(k > t * 1e6 for k, t in zip(kern, samples_s))
    if over:  # events bracket the kernels: a longer kernel means the records were not the sample's
        return {"cupti": f"failed: kernel time above the event time in {over} of {len(kern)} samples"}
    return out
