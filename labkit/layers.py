"""The floors of labkit/, lowest first: which module sits on which floor, and why each function-level
import is one. A module imports only from its own floor or a floor below it, at module level or inside
a function, and no chain of imports comes back to where it started (tests/test_layers_cpu.py).
README's Layout section is rendered from FLOORS (python -m labkit.readme).

The floors are declared here rather than shown as folders: labkit/ keeps its flat module names, so
`labkit.timing`, `from labkit.records import ...`, the notebooks and the CLI's `-m` entry points stay
as users and open branches know them; a folder per floor would rename nearly every module at once.

Imports sit at module level unless LAZY lists them with one of REASONS, each of which the test checks
against the code (a reason that no longer holds fails, and so does an entry no import uses)."""
from __future__ import annotations

# (floor, what it holds, {module: what it is}); a module of a subpackage is its package's (ops/add.py: ops)
FLOORS = [
    ("leaf", "facts and tools; nothing here measures", {
        "errors": "the error taxonomy", "version": "", "layers": "this table", "paths": "folders and the atomic writer",
        "dtypes": "the one dtype table", "shapes": "", "device": "GPU facts, no measuring",
        "toolkit": "nvcc & co., wheels included, each run with a timeout",
        "ranges": "NVTX ranges and the `Scope` of the open ones", "stats": "",
        "schema": "the result row's fields, its key, the variant label `name[axis=value]`",
    }),
    ("spec", "what an op is and what a right answer is", {
        "spec": "`Op`, its records by use `Data`, `Cost`, `Call`, `Testing`, `Block`; `Variant`, `V(...)`",
        "registry": "",
        "ops": "`ops/<family>.py`, one per `kernels/<family>.cu`; an op carries every fact about it, bound, group, "
               "block size, fuzz caps, so a new op is its `.cu` and its module: `tests/test_new_op_cpu.py`; "
               "`ops/families.py`: the unary and row-op skeletons",
        "tensors": "", "check": "", "cache_states": "one class per cache state, registered",
        "guard": "the DRAM traffic a row implies",
    }),
    ("build", "sources in, libraries and machine code out", {
        "build": "libraries; the export table generated from the variant lines", "sass": "", "sass_diff": "",
        "inline_kernel": "",
    }),
    ("measure", "one launch, timed", {
        "launch": "ctypes launcher calls, packed once per configuration", "timing": "",
        "cupti": "the timed launches' own kernel records",
        "energy": "NVML; `energy.measure` is timing then the launches back to back", "ceilings": "",
    }),
    ("run", "configurations in, rows out", {
        "config": "a `Config` resolved once; `plan`", "runner": "check, time, re-check, CUPTI",
        "session": "the one run loop", "workers": "a process per GPU", "worker_child": "the worker's own side",
        "cluster": "Dask", "cluster_procs": "a local scheduler and workers as processes of their own",
        "remote": "an attendee's connection to `labkit serve`", "records": "", "calls": "`labkit.call`",
        "sweeps": "", "verdicts": "rows keep their samples; intervals and verdicts between rows",
    }),
    ("faces", "what a user calls: the API, the CLI, the notebooks' helpers, reports", {
        "__init__": "the API", "cli": "", "explore": "`explore/`", "nsight": "`nsight/`", "why": "", "hints": "",
        "roofline": "", "recorded": "", "tables": "", "readme": "",
        "serve": "`serve/`, `labkit serve`: queue, dispatcher, GPU guard, board", "benchmarks": "`benchmarks/`",
        "clocks": "`clocks/`, `labkit reconcile`: the harnesses, the relations as data, nvbench's and triton's graph's child processes",
        "selftest": "`labkit aa`: the A/A test", "main_job": "`labkit` with no arguments",
        "notebooks": "`labkit workshop`: attendee copies, the strip filter and save hook",
        "labs": "what the labs' cells share",
    }),
]
FLOOR = {module: k for k, (_, _, modules) in enumerate(FLOORS) for module in modules}

# why an import may sit inside a function (the test checks each claim)
TORCH_FREE = "torch-free import"  # torch or pandas, or a labkit module that imports one at module level
EXTRA = "optional extra"          # a package of an optional extra (EXTRAS), or a module that imports one
MAY_BE_MISSING = "may be missing"  # a dependency labkit runs without: imported in a try that catches ImportError
FAST_START = "fast start"         # `import labkit` / the `labkit` command load the importer, not the target,
                                  # which would bring a third-party package along
REASONS = (TORCH_FREE, EXTRA, MAY_BE_MISSING, FAST_START)
HEAVY = ("torch", "pandas")
EXTRAS = ("triton", "cuda", "plotly", "ipywidgets", "IPython", "anywidget", "dask", "distributed", "dask_cuda",
          "cryptography", "nbformat", "nbclient", "jupyter_core", "jupyter_server", "tornado")

# {importing module: {imported module: reason}}: labkit's modules as ".name", other packages by their
# top-level name ("torch" covers torch.utils too); a package's entry holds for each of its modules
LAZY = {
    "__init__": {
        ".config": FAST_START, ".inline_kernel": FAST_START, ".records": FAST_START, ".remote": FAST_START,
        ".session": FAST_START, ".timing": FAST_START,
    },
    "benchmarks.explorer_latency": {"nbclient": EXTRA, "nbformat": EXTRA, ".explore": EXTRA},
    "benchmarks.launch_cost": {"torch": TORCH_FREE},
    "benchmarks.timing_agree": {"torch": TORCH_FREE},
    "benchmarks.zoo": {"torch": TORCH_FREE},
    "benchmarks.floors": {"torch": TORCH_FREE},
    "build": {"torch": TORCH_FREE},
    "calls": {"torch": TORCH_FREE},
    "ceilings": {"torch": TORCH_FREE},
    "check": {"torch": TORCH_FREE},
    "cli": {
        "torch": TORCH_FREE, ".build": FAST_START, ".ceilings": FAST_START, ".clocks.cli": FAST_START,
        ".config": FAST_START, ".main_job": FAST_START, ".nsight.cli": FAST_START, ".recorded": FAST_START,
        ".records": FAST_START, ".sass": FAST_START, ".sass_diff": FAST_START, ".serve.server": FAST_START,
        ".session": FAST_START, ".stats": FAST_START, ".sweeps": FAST_START, ".tables": FAST_START,
    },
    "clocks": {
        "pandas": TORCH_FREE, "torch": TORCH_FREE, ".clocks.harnesses": FAST_START, ".config": FAST_START,
        ".records": FAST_START,
    },
    "clocks.harnesses": {"torch": TORCH_FREE, "triton": EXTRA},
    "clocks.nvbench_child": {"cuda": EXTRA, "torch": TORCH_FREE},
    "cluster": {"distributed": EXTRA},
    "cluster_procs": {"dask_cuda": EXTRA, "distributed": EXTRA},
    "cupti": {"torch": TORCH_FREE, "cupti": MAY_BE_MISSING},
    "device": {"pynvml": MAY_BE_MISSING, "torch": TORCH_FREE},
    "dtypes": {"torch": TORCH_FREE},
    "energy": {"pynvml": MAY_BE_MISSING, "torch": TORCH_FREE},
    "explore.figure": {"plotly": EXTRA},
    "explore.views": {"plotly": EXTRA},
    "labs": {"pandas": TORCH_FREE, "plotly": EXTRA},
    "launch": {"torch": TORCH_FREE, ".build": FAST_START},
    "notebooks": {"jupyter_core": EXTRA, "jupyter_server": EXTRA, "nbformat": EXTRA},
    "nsight.check": {"pandas": TORCH_FREE, "plotly": EXTRA},
    "nsight.cli": {"pandas": TORCH_FREE},
    "nsight.ncu": {"pandas": TORCH_FREE},
    "nsight.nsys": {"pandas": TORCH_FREE},
    "nsight.profiling": {"pandas": TORCH_FREE},
    "ops": {"torch": TORCH_FREE},  # every module of ops/ (a new op's too): references and baselines make tensors
    "recorded": {"pandas": TORCH_FREE},
    "records": {"pandas": TORCH_FREE},
    "remote": {"IPython": EXTRA, "cryptography": EXTRA, "distributed": EXTRA},
    "roofline": {"plotly": EXTRA},
    "runner": {"torch": TORCH_FREE},
    "sass": {"pandas": TORCH_FREE},
    "selftest": {".config": FAST_START, ".records": FAST_START, ".session": FAST_START, ".stats": FAST_START},
    "serve.dispatch": {"distributed": EXTRA},
    "serve.server": {"distributed": EXTRA},
    "serve.web": {"tornado": EXTRA},
    "tables": {"pandas": TORCH_FREE},
    "tensors": {"torch": TORCH_FREE},
    "timing": {"torch": TORCH_FREE},
    "verdicts": {".stats": FAST_START},
    "why": {
        ".ceilings": FAST_START, ".config": FAST_START, ".hints": FAST_START, ".nsight": FAST_START,
        ".recorded": FAST_START, ".records": FAST_START, ".roofline": FAST_START, ".sass": FAST_START,
        ".session": FAST_START,
    },
}
