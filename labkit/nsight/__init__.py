"""Nsight Systems and Nsight Compute from labkit: profile a bench or sweep, read the report back
into DataFrames, and check labkit's times against Nsight's.

    p = profile("add", ["f16x8", "f16x8_pack", "torch"], ["4096x4096"], modes=("cold", "hot"))
    p.ranges      # NVTX ranges (nsys stats nvtx_sum)
    p.kernels     # per config x mode x phase x kernel: launches, median duration (from the SQLite export)
    p.check       # labkit's median vs nsys's median kernel duration in the same `timed <mode>` range
    ncu_metrics("add", "f16x8_pack", "4096x4096")   # DRAM bytes / throughput / registers vs the byte model

The modules, each importing only those before it: tools (find and run nsys / ncu with a timeout;
the profiled labkit command), names (range and kernel names; variant labels are labkit.schema's),
nsys (nsys commands, stats CSV and SQLite readers), ncu (ncu command, CSV reader, metrics table),
check (cross-check, goal, plot), profiling (Profile, profile(), recorded summaries), cli (`labkit profile`).
"""
from .check import check_plot, cross_check, goal
from .names import kernel_short, kernel_template, parse_config, range_kind, split_range
from .ncu import (NCU_METRICS, UNDER_NCU, kernel_regex, ncu_argv, ncu_metrics, ncu_table, nvtx_path, read_ncu_csv,
                  with_model)
from .nsys import (config_kernels, launch_kernels, nsys_export_argv, nsys_profile_argv, nsys_stats_argv, nvtx_ranges,
                   read_sqlite, read_stats_csv)
from .profiling import Profile, load_profile, parse_bench_log, profile, recorded_dir, recorded_ncu, recorded_profile
from .tools import bench_argv, find_tool, run_tool, shell, sweep_argv

__all__ = ["NCU_METRICS", "UNDER_NCU", "Profile", "bench_argv", "check_plot", "config_kernels", "cross_check",
           "find_tool", "goal", "kernel_regex", "kernel_short", "kernel_template", "launch_kernels", "load_profile",
           "ncu_argv", "ncu_metrics", "ncu_table", "nsys_export_argv", "nsys_profile_argv", "nsys_stats_argv",
           "nvtx_path", "nvtx_ranges", "parse_bench_log", "parse_config", "profile", "range_kind", "read_ncu_csv",
           "read_sqlite", "read_stats_csv", "recorded_dir", "recorded_ncu", "recorded_profile", "run_tool", "shell",
           "split_range", "sweep_argv", "with_model"]
