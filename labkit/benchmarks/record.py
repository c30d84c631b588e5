"""Re-record this GPU's shipped results, most important first, within a deadline:

    python -m labkit.benchmarks.record --deadline 540 --logs DIR [--pack FILE.tgz] [--skip STAGE ...]

Stages: build, ceilings, timing agreement (events / CUPTI / nsys), seed 000, the GPU tests, launch
cost, kernel-time cost, access width, the zoo and tuning sweeps, the sanitizers, explorer and worker
latency. Each stage is a command of its own (its output in DIR/<stage>.log); a stage that would not
fit in the time left is skipped and listed in DIR/record.json. Results go to results/<gpu>/ (or
$LABKIT_RESULTS); with --pack, results and logs are packed after every stage, so a run that is cut
off still leaves what it measured."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

PY = sys.executable
ZOO = ["softmax-rows", "layer-norm", "rms-norm", "reduce-sum", "dot", "histogram", "relu", "sigmoid", "softmax",
       "embedding", "sgemv", "sgemm"]


def stages(budget: float) -> list:
    """(name, command, seconds it needs at least): in the order they run."""
    b = f"{budget:g}"
    cli = [PY, "-m", "labkit.cli"]
    return [
        ("build", [*cli, "build"], 60),
        ("ceilings", [*cli, "peak", "--remeasure"], 20),
        ("timing-agree", [PY, "-m", "labkit.benchmarks.timing_agree", "--nsys", "--out", "{res}/timing-agree.json"], 90),
        ("seed000", [*cli, "sweep", "seed000", "--in-process", "--budget", b], 60),
        ("tests-timing", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "timing"], 60),
        ("tests", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "tests"], 90),
        ("launch-cost", [PY, "-m", "labkit.benchmarks.launch_cost", "--out", "{res}/launch-cost.json"], 15),
        ("memcheck", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "memcheck",
                      "--budget-s", "{cap:120}"], 60),
        ("racecheck", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "racecheck",
                       "--budget-s", "{cap:80}"], 45),
        ("access-width", [*cli, "sweep", "access-width", "--in-process", "--budget", b], 40),
        *[(z, [*cli, "sweep", z, "--in-process", "--budget", b], 15) for z in ZOO],
        ("copy-gs", [*cli, "sweep", "copy-gs", "--in-process", "--budget", b], 10),
        ("tune-add-block", [*cli, "sweep", "tune-add-block", "--in-process", "--energy", "--budget", b], 15),
        ("tune-softmax-rows", [*cli, "sweep", "tune-softmax-rows", "--in-process", "--energy", "--budget", b], 15),
        ("kernel-time-cost", [PY, "-m", "labkit.benchmarks.kernel_time_cost", "--budget", "0.1", "--repeat", "1",
                              "--out", "{res}/kernel-time-cost.json"], 50),
        ("explorer-latency", [PY, "-m", "labkit.benchmarks.explorer_latency", "--skip-labs",
                              "--out", "{res}/explorer-latency.json"], 40),
        ("nsight-summary", [*cli, "profile", "add", "-v", "f16x8,f16x8_pack,torch", "-d", "f16", "-s", "4096x4096",
                            "1024x1024", "--mode", "cold", "hot", "--save", "{res}/nsight"], 60),
        ("dask", [*cli, "sweep", "softmax", "--cluster", "local-cuda", "-o", "{res}/dask-softmax.jsonl",
                  "--budget", b], 60),
    ]
