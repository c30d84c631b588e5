"""Fuzz: every shipped variant on random shapes and element offsets, each checked against the op's
float64 reference through the runner's own check path (poisoned outputs, whole-output compare).

Shapes are drawn per axis from the sizes kernels get wrong: 1, primes, 2^k and 3 * 2^k (+- 1), and
log-uniform sizes; every tensor of a configuration starts `offset` elements into its buffer (0, or
1-7: views misaligned for every access width). Each variant's first case is the all-ones shape.
Sizes are capped per op (Op.testing.fuzz_caps) so the whole run takes well under a minute on an H100:

    python -m labkit.benchmarks.fuzz --seed 0 --out results/<gpu>/fuzz.json

The JSON summary holds the seed, the counts per op and variant, every configuration that was not
'ok' (with its error) and the provenance of the run. Exit status 1 when any result was wrong."""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

from labkit import build, device
from labkit.config import resolve
from labkit.device import provenance
from labkit.registry import family_exports, get_op, ops
from labkit.runner import ContextLost, Runner

PER_VARIANT = 96          # cases per variant: 68 shipped variants -> 6528 configurations
MAX_BYTES = 48 << 20      # bytes_moved of one configuration (H100: ~2 ms a configuration at 32 MiB)
MAX_FLOPS = 2e8           # and flops, for the compute-bound ops (sgemm)


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % p for p in range(2, math.isqrt(n) + 1))


def draw_size(rng: random.Random, cap: int) -> int:
    """One size in [1, cap]: 1, a prime, 2^k or 3 * 2^k (+- 1), or log-uniform. 3 * 2^k reaches the
    limits that are not powers of two: a 16-bit row of 24576 values is 48 KiB, the default shared memory."""
    kind = rng.random()
    if kind < 0.1 or cap == 1:
        return 1
    if kind < 0.35:  # the first prime at or after a log-uniform start (at most cap)
        n = max(2, int(math.exp(rng.uniform(0, math.log(cap)))))
        while n <= cap and not is_prime(n):
            n += 1
        return n if n <= cap else 2
    if kind < 0.7:
        k = rng.randint(1, max(1, int(math.log2(cap))))
        return min(cap, max(1, (rng.choice((1, 3)) << k) + rng.choice((-1, 0, 1))))
    return min(cap, max(1, int(math.exp(rng.uniform(0, math.log(cap + 1))))))


def draw_offset(rng: random.Random) -> int:
    return 0 if rng.random() < 0.4 else rng.randint(1, 7)


def fits(op, shape, dtype) -> bool:
    if op.cost.bytes_moved(shape, dtype) > MAX_BYTES:
        return False
    return not (op.bound == "compute" and op.cost.flops and op.cost.flops(shape, dtype) > MAX_FLOPS)


def draw_shape(rng: random.Random, op, dtype: str, tries: int = 200) -> tuple:
    """A shape for `op` within the caps and budget (rejection sampling, then halving the largest
    axis, which keeps at least the sizes of the other axes as drawn)."""
    caps = op.testing.fuzz_caps
    shape = caps
    for _ in range(tries):
        shape = tuple(draw_size(rng, c) for c in caps)
        if fits(op, shape, dtype):
            return shape
    shape = list(shape)
    while not fits(op, tuple(shape), dtype) and max(shape) > 1:
        k = shape.index(max(shape))
        shape[k] = (shape[k] + 1) // 2
    return tuple(shape)


def cases(ops, seed: int, per_variant: int = PER_VARIANT) -> list:
    """[(op, variant, shape, offset)] for every shipped (not torch, not inline) variant of `ops`;
    the same seed gives the same list."""
    rng = random.Random(seed)
    out = []
    for op in ops:
        for v in op.variants:
            if v.is_torch or v.is_inline:
                continue
            out.append((op, v, (1,) * len(op.shape_axes), rng.randint(1, 7)))  # size 1, misaligned
            out += [(op, v, draw_shape(rng, op, v.dtype), draw_offset(rng)) for _ in range(per_variant - 1)]
    return out


def run(selected, seed: int, per_variant: int = PER_VARIANT, prebuild: bool = True, progress=print) -> dict:
    """Run the cases; returns the summary (the JSON written by --out)."""
    t0 = time.perf_counter()
    if prebuild:  # every family library at once, in parallel (the run itself then only loads them)
        build.build_all({o.source: family_exports(o.source) for o in selected})
    build_s = time.perf_counter() - t0
    runner = Runner(peak=False, kernel_time=False)
    todo = cases(selected, seed, per_variant)
    counts: dict = {}
    bad, lost = [], None
    t1 = time.perf_counter()
    for k, (op, v, shape, offset) in enumerate(todo):
        cfg = resolve(op.name, v.name, v.dtype, shape, offset=offset, timed=False)
        try:
            rec = runner.run(cfg)
        except ContextLost as e:  # a kernel fault: this process can run nothing more
            rec, lost = e.record, str(e)
        status = rec.get("status", "error")
        c = counts.setdefault(op.name, {}).setdefault(v.name, {})
        c[status] = c.get(status, 0) + 1
        if status != "ok":
            bad.append({"op": op.name, "variant": v.name, "dtype": v.dtype, "shape": cfg.shape_s, "offset": offset,
                        "status": status, "error": rec.get("error")})
            if progress:
                progress(f"  {status}: {op.name} {v.name} {cfg.shape_s} offset {offset}: {rec.get('error')}")
        if lost:
            break
        if progress and (k + 1) % 200 == 0:
            progress(f"  {k + 1} of {len(todo)} configurations, {len(bad)} not ok")
    n = sum(sum(c.values()) for per_op in counts.values() for c in per_op.values())
    return {"seed": seed, "per_variant": per_variant, "configs": n, "planned": len(todo),
            "ok": n - len(bad), "not_ok": len(bad), "wrong": sum(b["status"] == "failed" for b in bad),
            "context_lost": lost, "variants": sum(len(x) for x in counts.values()),
            "offsets_misaligned": sum(1 for c in todo[:n] if c[3]), "build_s": round(build_s, 2),
            "run_s": round(time.perf_counter() - t1, 2), "max_bytes": MAX_BYTES,
            "caps": {op.name: op.testing.fuzz_caps for op in selected},
            "counts": counts, "failures": bad, **provenance()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-variant", type=int, default=PER_VARIANT, help=f"cases per variant (default {PER_VARIANT})")
    ap.add_argument("--ops", help="comma-separated ops (default: all)")
    ap.add_argument("--out", help="write the JSON summary here")
    a = ap.parse_args(argv)
    device.require_gpu()
    if a.per_variant < 1:
        ap.error("--per-variant must be >= 1")
    selected = [get_op(n) for n in a.ops.split(",")] if a.ops else list(ops().values())
    res = run(selected, a.seed, a.per_variant, progress=lambda s: print(s, flush=True))
    print(f"fuzz seed {res['seed']}: {res['configs']} configurations of {res['variants']} variants "
          f"({res['offsets_misaligned']} misaligned), {res['ok']} ok, {res['wrong']} wrong, "
          f"{res['not_ok'] - res['wrong']} other; build {res['build_s']} s, run {res['run_s']} s")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))
    return res


if __name__ == "__main__":
    sys.exit(0 if main()["not_ok"] == 0 else 1)
