"""The pace of back-to-back launches, waited out before samples.

Back-to-back launches of a ~2 µs kernel run at one of two paces, ~0.18 µs a launch apart (H100 add
f16 1024²: 1.72-1.81 or 1.91-1.98 µs; kernels overlapping their predecessor's recorded end or leaving
a gap; CUPTI's kernel 1.83 µs in both; SM clock 1980 MHz throughout), and every clock in a process
reads the same one: back-to-back and single graph replays, triton's graph and labkit's hot flipped
together (results/nvidia-h100-80gb-hbm3/logs/066dd6a7b3a0/pace10.log). Processes replaying raw graphs
stayed fast for 5-40 s (pace9, pace11, pace12.log); processes running labkit's sampling loop turned
slow 1-5 s in (logs/2fed0a0b6d8f/timeline2.log, 066dd6a7b3a0/pace2-7.log), and a slow process turned
fast for ~0.4 s around another process's context (pace2.log, pace4.log); not CUPTI, a module load,
freeing memory or a cache state timed before (pace4-7.log). So a process's first samples on a device,
and those after a child process of its own, wait (`settle`), taking the loop's own groups of samples
and dropping them, until they step to the slow pace, at most SETTLE_S."""
from __future__ import annotations

import statistics
import time

SETTLE_S = 5.0         # the longest wait after the device's pace last changed (1-5 s seen)
LONG_S = 20e-6         # launches this long: the paces' ~0.18 µs is < 1 % of them, no wait
STEP = 0.04            # fast -> slow: +9-11 % a launch at 1-2 µs
_since: dict = {}      # device -> time.monotonic() of the process's first measurement on it, or of `disturbed`
_marked: set = set()   # the devices measured on in this process


def _device() -> int:
    import torch

    return torch.cuda.current_device()


def mark() -> None:
    """The process's first measurement on the current device starts the clock (later calls: nothing);
    its context may be younger than a `disturbed` before it."""
    if _device() not in _marked:
        _marked.add(_device())
        _since[_device()] = time.monotonic()


def disturbed() -> None:
    """Another process just created or ended a CUDA context on this device (a child this process ran):
    the next samples wait again."""
    _since[_device()] = time.monotonic()


def stepped(per: list) -> bool:
    """Whether the last 3 groups' time per launch stands STEP above the fastest before them: the fast
    pace has ended."""
    return len(per) > 3 and statistics.median(per[-3:]) >= min(per[:-3]) * (1 + STEP)


def pending() -> bool:
    """Whether the current device's samples would still wait (starts the clock, as `mark`)."""
    mark()
    return time.monotonic() < _since[_device()] + SETTLE_S


def settle(sample=None) -> None:
    """Until SETTLE_S after the current device's pace last changed, `sample()` (one group of the timed
    loop's samples, taken as the loop takes them; seconds a launch) taken and dropped; over at once where
    a launch takes LONG_S or more, or once the groups step to the slow pace. Without `sample`, a sleep."""
    mark()
    end, per = _since[_device()] + SETTLE_S, []
    if sample is None:
        time.sleep(max(0.0, end - time.monotonic()))
    while sample is not None and time.monotonic() < end:
        per.append(sample())
        if per[0] >= LONG_S or stepped(per):
            break
