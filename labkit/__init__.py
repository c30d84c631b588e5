"""labkit: write, time and profile CUDA kernels from notebooks and the shell."""
__version__ = "0.1.0"

from .errors import CompileError, ConfigError, LabkitError, NoGPUError  # noqa: E402,F401
from .registry import get_op, ops as catalog  # noqa: E402,F401  (labkit.ops is the package of op modules)


def bench(op, variants=None, dtype=None, shapes=None, modes=("cold",), out=None, progress=True, offset=0,
          kernel_time=False, **rule):
    """Check and time `variants` of `op` over `shapes`; returns a DataFrame (and writes `out`,
    .csv/.json/.jsonl, if given). `rule` overrides the StopRule (e.g. budget_s=0.5); `kernel_time`
    also records CUPTI kernel durations (kernel_us), the number Nsight Systems reports."""
    from .ranges import nvtx_range
    from .records import ResultLog, save
    from .runner import Runner, expand
    from .stats import StopRule
    from .sweeps import run_configs

    o = get_op(op)
    runner = Runner(StopRule(**rule), ResultLog(), kernel_time=kernel_time)
    configs = expand(o, variants, dtype, shapes, (modes,) if isinstance(modes, str) else tuple(modes))
    with nvtx_range(f"bench {o.name}"), nvtx_range(o.name):
        run_configs(runner, o, configs, o.name, offset=offset, progress=progress)
    if out:
        save(runner.log.rows, out)
    return runner.log.frame()


def call(op, variant, *inputs):
    """Run one variant on your tensors; returns the output(s)."""
    from .runner import call as _call

    return _call(op, variant, *inputs)


def inline(op, name, source, kernel, dtype, width=1, block=256):
    """Compile a `__global__` kernel written in a notebook cell as a new variant of `op`."""
    from .inline_kernel import inline_variant

    return inline_variant(op, name, source, kernel, dtype, width, block)
