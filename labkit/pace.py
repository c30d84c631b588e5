"""A fresh context's pace, waited out before samples.

Back-to-back launches of a ~2 µs kernel run at one of two paces, ~0.18 µs a launch apart (H100 add
f16 1024²: 1.73-1.80 or 1.91-1.98 µs, their kernels overlapping their predecessor's recorded end or
leaving a gap; CUPTI's kernel 1.83 µs in both; the SM clock at 1980 MHz throughout). The fast pace is
seen for 1.9-4.7 s after the process's own context, and for ~0.4 s while another process's context
is created or ends, or as long as it runs kernels (results/<gpu>/logs/2fed0a0b6d8f/timeline2.log,
logs/066dd6a7b3a0/pace2.log, pace4.log); not after CUPTI (pace6.log), a module load (pace7.log),
freeing memory (pace4.log) or any cache state timed before (pace5.log). A process's first samples on
a device, and those after a child process of its own, wait (`settle`) until the step to the slow
pace, at most SETTLE_S, the pace longer-lived processes and the other harnesses see."""
from __future__ import annotations

import statistics
import time

SETTLE_S = 5.0         # the longest wait after the device's pace last changed
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
    """Whether the last 3 replays' time per launch stands STEP above the fastest before them: the
    fast pace has ended."""
    return len(per) > 3 and statistics.median(per[-3:]) >= min(per[:-3]) * (1 + STEP)


def settle(body=None, batch: int = 1) -> None:
    """Until SETTLE_S after the current device's pace last changed, `body` (`batch` launches) replayed
    back to back, two in flight, each timed by events; over at once where a launch takes LONG_S or more,
    or once the replays step to the slow pace. Without a body, a sleep; nothing once SETTLE_S has passed."""
    import torch

    mark()
    end, pairs, per = _since[_device()] + SETTLE_S, [], []
    if body is None:
        time.sleep(max(0.0, end - time.monotonic()))
    while body is not None and time.monotonic() < end:
        pair = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        pair[0].record()
        body()
        pair[1].record()
        pairs.append(pair)
        if len(pairs) > 1:
            a, b = pairs.pop(0)
            b.synchronize()
            per.append(a.elapsed_time(b) * 1e-3 / batch)
            if per[0] >= LONG_S or stepped(per):
                break
    torch.cuda.current_stream().synchronize()
