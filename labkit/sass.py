"""Machine code of the kernels: compile a kernel file to a cubin with nvcc (no GPU needed) and read
its SASS with cuobjdump: registers per thread, the widths of global and shared loads and stores,
instruction counts, the occupancy those resources allow with the launcher's block size
(block_threads, from each op's Op.block), and (labkit.sass_diff) two variants' SASS side by side."""
from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

from .build import NVCC_FLAGS, build_key, check_arch, generated, parse_compile_error
from .errors import ConfigError, ToolMissingError
from .paths import KERNELS_DIR, cache_root
from .registry import family_exports, get_op
from .toolkit import failed, run, tool

_LDST = re.compile(r"\b(LDG|STG)\.E(?P<mods>(?:\.[A-Z0-9_]+)*)")
_WIDTH = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}
_RES = re.compile(r"Function (\S+):\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
# one SASS instruction: /*addr*/ [@pred] OPCODE.MODS operands ;
_INSTR = re.compile(r"/\*(?P<addr>[0-9a-f]{4,})\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_.]*)\s*(?P<args>[^;]*);")
# the memory instructions whose widths are counted (global, shared, cp.async global->shared)
MEM_KINDS = ("LDG", "STG", "LDS", "STS", "LDGSTS")
# every memory opcode (the diff aligns on them): the above, local (spills), generic, atomics, ldmatrix
MEMORY = frozenset(MEM_KINDS + ("LDL", "STL", "LD", "ST", "RED", "ATOM", "ATOMG", "ATOMS", "LDSM"))


def compile_cubin(source: Path, arch: str, out: Path) -> Path:
    cmd = [tool("nvcc"), *NVCC_FLAGS, f"-arch=sm_{arch}", "-cubin", "-I", str(KERNELS_DIR), "-o", str(out), str(source)]
    r = run(cmd, "nvcc", what=f"nvcc (compiling {source.name} for sm_{arch})")
    if r.returncode != 0:
        raise parse_compile_error(r.stderr + r.stdout)
    return out


def demangle(names: list[str]) -> list[str]:
    try:
        filt = tool("cu++filt")
    except ToolMissingError:
        filt = shutil.which("c++filt")
    if not filt:
        return names
    r = run([filt], "c++filt", input="\n".join(names))
    return r.stdout.splitlines() if r.returncode == 0 else names


def mem_widths(instrs: list[str], kind: str) -> set[int]:
    """Bit widths of the global loads (LDG) or stores (STG) in SASS lines."""
    out = set()
    for line in instrs:
        for m in _LDST.finditer(line):
            if m.group(1) != kind:
                continue
            mods = m.group("mods").split(".")
            out.add(next((_WIDTH[x] for x in mods if x in _WIDTH), 32))
    return out


def instructions(lines: list[str]) -> list[dict]:
    """SASS lines (as cuobjdump prints them) -> [{addr, pred, opcode ('LDG.E.128.CONSTANT'), base
    ('LDG'), args, text ('LDG.E.128.CONSTANT R8, desc[UR6][R8.64]'), mem: bool, bits}]; bits is the
    access width of a counted memory instruction (MEM_KINDS), else None. Encoding-only lines are skipped."""
    out = []
    for line in lines:
        m = _INSTR.search(line)
        if not m:
            continue
        op = m.group("op")
        base, _, mods = op.partition(".")
        pred = (m.group("pred") or "").strip()
        args = " ".join(m.group("args").split())
        bits = None
        if base in MEM_KINDS:
            bits = next((_WIDTH[x] for x in mods.split(".") if x in _WIDTH), 32)
        out.append({"addr": int(m.group("addr"), 16), "pred": pred, "opcode": op, "base": base, "args": args,
                    "text": f"{pred + ' ' if pred else ''}{op} {args}".strip(), "mem": base in MEMORY, "bits": bits})
    return out


def counts(f: dict) -> dict:
    """A kernel's (find_kernel's dict) numbers: instructions (NOP padding left out), registers,
    shared / local bytes, and per counted memory kind {bits: instructions}, e.g. LDG {32: 8, 16: 2}."""
    ins = [i for i in instructions(f["sass"]) if i["base"] != "NOP"]
    out = {"instructions": len(ins), "registers": f.get("registers"), "shared": f.get("shared"),
           "local": f.get("local"), "stack": f.get("stack")}
    for kind in MEM_KINDS:
        by: dict = {}
        for i in ins:
            if i["base"] == kind:
                by[i["bits"]] = by.get(i["bits"], 0) + 1
        out[kind] = dict(sorted(by.items()))
    return out


def width_summary(by_bits: dict) -> str:
    """{32: 8, 16: 2} -> '8 x 32-bit, 2 x 16-bit' (widest first); 'none' when empty."""
    return ", ".join(f"{n} x {b}-bit" for b, n in sorted(by_bits.items(), reverse=True)) or "none"


# Per-SM limits by compute capability (CUDA C++ Programming Guide, "Technical Specifications per
# Compute Capability"): registers, resident threads, resident blocks, shared memory (bytes).
SM_LIMITS = {
    "80": {"registers": 65536, "threads": 2048, "blocks": 32, "shared": 164 << 10},
    "86": {"registers": 65536, "threads": 1536, "blocks": 16, "shared": 100 << 10},
    "89": {"registers": 65536, "threads": 1536, "blocks": 24, "shared": 100 << 10},
    "90": {"registers": 65536, "threads": 2048, "blocks": 32, "shared": 228 << 10},
}
REG_UNIT = 256          # registers are allocated per warp, in units of 256
SMEM_UNIT = 128         # shared memory is allocated per block in units of 128 bytes ...
SMEM_RESERVED = 1024    # ... plus 1 KiB the system keeps per block (sm_80 and later)


def occupancy(registers: int, shared_bytes: int, threads: int, arch: str = "90") -> dict:
    """Resident blocks per SM for a kernel using `registers` per thread and `shared_bytes` (static +
    dynamic) per block, launched with `threads` per block: each limit (threads, blocks, registers,
    shared memory) as blocks per SM, the smallest (`limiter`), warps per SM and % of the maximum.
    The register limit is per SM sub-partition (4 per SM), as CUDA's occupancy calculator counts it."""
    arch = str(arch)
    if arch not in SM_LIMITS:
        raise ValueError(f"no occupancy limits for sm_{arch}; known: {', '.join('sm_' + a for a in SM_LIMITS)}")
    if threads < 1 or threads > 1024:
        raise ValueError(f"threads per block must be in [1, 1024], got {threads}")
    lim = SM_LIMITS[arch]
    warps = -(-threads // 32)
    per_warp = -(-(registers or 0) * 32 // REG_UNIT) * REG_UNIT
    smem = -(-(shared_bytes or 0) // SMEM_UNIT) * SMEM_UNIT + SMEM_RESERVED
    by = {"threads": lim["threads"] // (warps * 32), "blocks": lim["blocks"],
          "registers": (4 * (lim["registers"] // 4 // per_warp)) // warps if per_warp else lim["blocks"],
          "shared memory": lim["shared"] // smem}
    blocks = min(by.values())
    limiter = next(k for k, v in by.items() if v == blocks)  # ties: the first named (threads before registers)
    max_warps = lim["threads"] // 32
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "max_warps_per_sm": max_warps,
            "occupancy_pct": 100 * blocks * warps / max_warps, "limiter": limiter, "by": by, "arch": arch,
            "threads": threads, "registers": registers, "shared_bytes": shared_bytes or 0}


def block_threads(o, v, shape, axes=()) -> tuple:
    """(threads per block, where that number comes from) for variant `v` of op `o` at `shape`;
    (None, why) where the launcher picks it at run time (the row plan). The op states it (Op.block,
    with the launcher text that sets it, which tests/test_sass_cpu.py finds in the kernel file); a
    `block` tuning axis overrides it (add: BLOCK = the axis); when ncu ran, its Block Size is used."""
    if v.is_inline:  # the launcher template rendered with the inline variant's block
        m = re.search(r"<<<[^,]+,\s*(\d+)\s*,", v.source.read_text())
        return (int(m.group(1)), "the inline launcher") if m else (None, "not found in the inline launcher")
    ax = dict(axes)
    if "block" in o.axes:
        b = ax.get("block", o.axes["block"][0])
        return b, f"tuning axis block={b}" + ("" if "block" in ax else " (default)")
    block = o.block
    where = f"kernels/{block.file or o.source}: " + ", ".join(f"`{x}`" for x in block.evidence)
    threads = block.threads.get(v.name) if isinstance(block.threads, dict) else block.threads
    if callable(threads):  # e.g. embedding: one block per row, sized by the row
        threads, why = threads(v, shape, ax)
        return threads, f"{where} ({why})"
    if threads is None:
        return None, block.why or f"{o.name} states no threads per block (Op.block)"
    return threads, where


def functions(cubin: Path) -> dict[str, dict]:
    """Demangled kernel name -> {'sass': [lines], 'registers', 'stack', 'shared', 'local'}."""
    return _functions(str(cubin), Path(cubin).stat().st_mtime)


@functools.lru_cache(maxsize=64)
def _functions(cubin: str, mtime: float) -> dict[str, dict]:
    dump, res = _cuobjdump("-sass", cubin), _cuobjdump("-res-usage", cubin)
    mangled, bodies, cur = [], [], None
    for line in dump.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            mangled.append(m.group(1))
            bodies.append([])
            cur = bodies[-1]
        elif cur is not None:
            cur.append(line)
    usage = {m.group(1): tuple(int(x) for x in m.groups()[1:]) for m in _RES.finditer(res)}
    names = demangle(mangled)
    out = {}
    for name, mang, body in zip(names, mangled, bodies):
        reg, stack, shared, local = usage.get(mang, (None,) * 4)
        out[name] = {"sass": body, "registers": reg, "stack": stack, "shared": shared, "local": local}
    return out


def _cuobjdump(flag: str, cubin: str) -> str:
    r = run([tool("cuobjdump"), flag, cubin], "cuobjdump")
    if r.returncode:
        raise failed(r, "cuobjdump")
    return r.stdout


_CAST = re.compile(r"\((?:unsigned |signed )?(int|long|long long|short|char|bool)\)(-?\d+)[uUlL]*")


def canonical(name: str) -> str:
    """A demangled name with plain template values: the toolkit's cu++filt writes them with casts
    ('add_kernel<__half, (int)8, (int)4>', '(bool)1'), binutils' c++filt and Variant.kernel do not."""
    return _CAST.sub(lambda m: ("false" if m.group(2) == "0" else "true") if m.group(1) == "bool" else m.group(2), name)


def find_kernel(funcs: dict, kernel: str) -> dict:
    """The function whose demangled name is `kernel<...>(...)` (return type and args ignored)."""
    kernel = canonical(kernel)
    for name, f in funcs.items():
        base = canonical(re.sub(r"^void ", "", name))
        if base.startswith(kernel + "(") or base == kernel or base.startswith(kernel + " ("):
            return f
    raise KeyError(f"kernel {kernel!r} not found; kernels: {list(funcs)}")


def cubin(source, arch: str = "90", deps=()) -> Path:
    """The cubin of a .cu file for sm_<arch>, compiled once per content (kept in the build cache,
    named by a hash of the source, `deps`, the shared headers and the flags)."""
    arch = check_arch(arch)
    source = Path(source)
    key = build_key([source], [*NVCC_FLAGS, arch, "cubin"], deps)
    out = cache_root() / "sass" / f"{source.stem}-sm{arch}-{key}.cubin"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = out.with_suffix(".tmp.cubin")
        compile_cubin(source, arch, tmp)
        tmp.replace(out)
    return out


def family_cubin(family: str, arch: str = "90") -> Path:
    """The cubin of a kernel family with its generated export table (every shipped variant's
    kernels instantiated)."""
    return cubin(generated(family, family_exports(family)), arch, deps=[KERNELS_DIR / family])


def variant_cubin(op, v, arch: str = "90") -> Path:
    """The cubin holding a variant's kernel: its family's, or an inline variant's own."""
    return cubin(v.source, arch) if v.is_inline else family_cubin(op.source, arch)


def report(op_name: str, arch: str = "90"):
    """Per variant of an op: kernel, registers per thread, widest global load/store (bits), local
    memory bytes (spills). Needs nvcc and cuobjdump, not a GPU."""
    import pandas as pd

    op = get_op(op_name)
    rows = []
    for v in op.variants:
        if not v.kernel:
            continue
        f = find_kernel(functions(variant_cubin(op, v, arch)), v.kernel)
        ld, st = mem_widths(f["sass"], "LDG"), mem_widths(f["sass"], "STG")
        rows.append({"op": op.name, "variant": v.name, "dtype": v.dtype, "kernel": v.kernel, "access_bytes": v.access,
                     "registers": f["registers"], "ldg_bits": max(ld, default=0), "stg_bits": max(st, default=0),
                     "ldg_count": sum(line.count("LDG") for line in f["sass"]), "local_bytes": f["local"]})
    return pd.DataFrame(rows)


def variant_kernel(op, v, arch: str = "90") -> dict:
    """The variant's kernel in its cubin (find_kernel's dict). Raises ConfigError for the torch
    baseline (no kernel of labkit's) and for a variant with no kernel name."""
    if v.is_torch:
        raise ConfigError(f"{op.name} torch is torch's own kernel: labkit has no SASS of it; pick a labkit variant")
    if not v.kernel:
        raise ConfigError(f"{op.name} {v.name} names no kernel (Variant.kernel), so its SASS cannot be found")
    return find_kernel(functions(variant_cubin(op, v, arch)), v.kernel)
