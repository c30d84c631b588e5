"""A fresh context's pace, waited out before samples.

For 1-2 s after a process creates a CUDA context on the GPU, back-to-back launches of a 2 µs kernel run
~10 % closer together, whatever runs meanwhile, and again for ~0.6 s after another process creates one
(H100 add f16 1024²: 1.73 -> 1.915 µs a launch 2.0 s after this process's context, 1.736 for 0.6 s after
another process's; H200 1.64 -> 1.82 at 1.1 s, fast again when another process's context ended;
results/<gpu>/logs/2fed0a0b6d8f/timeline2.log, timeline.log; the SM clock read 1980 MHz throughout).
A process's first samples on a device, and those after a child process of its own, wait SETTLE_S
(`settle`), at the pace longer-lived processes and the other harnesses see."""
from __future__ import annotations

import time

SETTLE_S = 3.0         # samples begin this long after the device's pace last changed
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
    the next samples wait SETTLE_S again."""
    _since[_device()] = time.monotonic()


def settle(body=None) -> None:
    """Until SETTLE_S after the current device's pace last changed, `body` replayed back to back (two
    in flight), or a sleep; nothing once that has passed."""
    import torch

    mark()
    end, evs = _since[_device()] + SETTLE_S, []
    if body is None:
        time.sleep(max(0.0, end - time.monotonic()))
    while body is not None and time.monotonic() < end:
        body()
        evs = evs[-1:] + [torch.cuda.Event()]
        evs[-1].record()
        evs[0].synchronize()
    torch.cuda.current_stream().synchronize()
