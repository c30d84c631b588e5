"""labkit: write, check, time and profile CUDA kernels from notebooks and the shell.

The public face (importing labkit does not import torch):
    labkit.bench(op, variants, shapes=..., modes=...)   check + time, a DataFrame of records
    labkit.call(op, variant, *tensors, **params)         one variant on your tensors
    labkit.inline(op, name, source, kernel, dtype)       a kernel from a notebook cell as a variant
    labkit.measure(fn, mode="cold")                      time any closure with labkit's harness
    labkit.why(op, variant, shape)                       why a variant runs as fast as it does
    labkit.aa(op, variant, shape)                        A/A self-test: this GPU's false-verdict rate
    labkit.reconcile(op, variant, shape, dtype)          every clock (nvbench, triton, nsys) on one config
    labkit.connect(address, token, name=...)             measure on a workshop's `labkit serve` box
"""
from . import cache_states, device
from .calls import call  # noqa: F401  (no torch at import; one attribute lookup less per call)
from .errors import BuildError, CompileError, ConfigError, LabkitError, LaunchError, NoGPUError  # noqa: F401
from .registry import get_op, ops as catalog  # noqa: F401  (labkit.ops is the package of op modules)
from .selftest import aa  # noqa: F401
from .version import __version__  # noqa: F401
from .clocks import reconcile  # noqa: F401  (labkit.clocks: every clock on one configuration)
from .why import why  # noqa: F401  (eager: `from .why import why` elsewhere would rebind labkit.why)


def bench(op, variants=None, dtype=None, shapes=None, modes=("cold",), width=None, out=None, progress=True,
          offset=0, kernel_time=True, energy=False, workers=True, gpus=None, axes=None, **rule):
    """Check and time `variants` of `op` over `shapes` and `modes`; returns a DataFrame (and writes
    `out`, .csv/.json/.jsonl, if given: the path is checked before anything runs). `rule` overrides
    the StopRule (e.g. budget_s=0.5). Runs in worker processes (one per GPU of `gpus`, default all)
    unless workers=False; `axes` sweeps tuning axes, e.g. {"block": [128, 256, 512]}."""
    from .config import plan
    from .records import ResultLog, check_output, save
    from .remote import connected
    from .session import run

    if out:
        check_output(out)
    configs = plan(op, variants, dtype, shapes, modes, width, offset, rule, axes=axes)
    log = ResultLog()
    try:
        run(configs, log, connected(), title=f"bench {configs[0].op}", progress=progress, workers=workers,
            gpus=gpus, kernel_time=kernel_time, energy=energy)
    finally:
        if out and log.rows:  # also on Ctrl-C or an error: what was measured is kept
            save(log.rows, out)
    return log.frame()


def inline(op, name, source, kernel, dtype, width=1, block=256):
    """Compile a `__global__` kernel written in a notebook cell as a new variant of `op` (connected
    to `labkit serve`: the source travels with each run and the box builds it)."""
    from .inline_kernel import inline_variant
    from .remote import connected

    return inline_variant(op, name, source, kernel, dtype, width, block, build=connected() is None)


def connect(address=None, token=None, name=None):
    """Measure on a workshop's GPU box from now on: labkit.bench, inline kernels, the explorer's live
    mode and the labs' cells run there (`labkit serve` prints the address and token; LABKIT_SERVER,
    LABKIT_TOKEN and LABKIT_NAME do the same without a call). `name` is how the room's board shows you.
    labkit.call and labkit.measure stay on this machine."""
    from .remote import connect as _connect

    return _connect(address, token, name)


def measure(fn, mode="cold", **rule):
    """Time `fn()` (GPU work on the current stream) with labkit's harness: warm-up, the blocking
    kernel, the cache state's setup (labkit.cache_states: an L2 flush, a CUDA graph), adaptive
    sampling. A rotating state takes a list of callables, one per input/output set (together >= 3x
    the L2). Returns a Measurement (`.summary.median` seconds, `.samples_s`, `.stop_reason`).
    triton's do_bench counterpart."""
    from .config import make_rule
    from .timing import measure as _measure

    state = cache_states.get(mode)
    fns = fn if isinstance(fn, (list, tuple)) and state.rotate else [fn]
    if not fns or not all(callable(f) for f in fns):
        raise ConfigError(f"labkit.measure takes a callable that launches GPU work, e.g. "
                          f"labkit.measure(lambda: torch.add(a, b, out=c)); got a {type(fn).__name__}")
    if state.rotate and not isinstance(fn, (list, tuple)):
        raise ConfigError(f"mode {mode!r} cycles through buffer sets: pass a list of callables, one per "
                          "input/output set, together >= 3x the L2 (one callable on one set is what 'hot' times)")
    r = make_rule(None, **rule)
    device.require_gpu()
    return _measure(fn, mode, r)
