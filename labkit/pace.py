"""The pace of back-to-back launches: a process's first measurement on a device is thrown away.

Back-to-back launches of a ~2 µs kernel run at one of two paces, ~0.18 µs a launch apart (H100 add
f16 1024²: 1.72-1.81 or 1.91-1.98 µs; kernels overlapping their predecessor's recorded end or leaving
a gap; CUPTI's kernel 1.83 µs in both; SM clock 1980 MHz throughout), and every clock in a process
reads the same one: back-to-back and single graph replays, triton's graph and labkit's hot flipped
together (results/nvidia-h100-80gb-hbm3/logs/a819a714ccd0/pace10.log). In a fresh process the first
measurement read the fast pace however long it waited first (3 or 5 s of the loop's own samples or of
replays), and everything after it the slow one: labkit's hot and triton's graph in turn within 2 %
(4 processes, logs/3efe74798414/pace8.log); raw replays alone stayed fast for 5-40 s (a819a714ccd0/
pace9, pace11, pace12.log), and a slow process read fast for ~0.4 s around another process's context
(066dd6a7b3a0/pace2.log, pace4.log); not CUPTI, a module load, freeing memory or a cache state timed
before (066dd6a7b3a0/pace4-7.log). So
a process's first measurement on a device, and its first after a child process of its own ran on it,
is preceded by a short one that is dropped (labkit.timing, NVTX phase `settle`)."""
from __future__ import annotations

_settled: set = set()  # devices measured on since this process started or last ran a child on them


def _device() -> int:
    import torch

    return torch.cuda.current_device()


def pending() -> bool:
    """Whether the next measurement on the current device is preceded by one thrown away."""
    return _device() not in _settled


def settled() -> None:
    _settled.add(_device())


def disturbed() -> None:
    """Another process just created or ended a CUDA context on this device (a child this process ran)."""
    _settled.discard(_device())
