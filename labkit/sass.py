"""Machine code of the kernels: compile a kernel file to a cubin with nvcc (no GPU needed) and read
its SASS with cuobjdump: registers per thread and the widths of global loads and stores."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from .errors import ToolMissingError
from .toolkit import tool

_LDST = re.compile(r"\b(LDG|STG)\.E(?P<mods>(?:\.[A-Z0-9_]+)*)")
_WIDTH = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}
_RES = re.compile(r"Function (\S+):\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def compile_cubin(source: Path, arch: str, out: Path) -> Path:
    from .build import NVCC_FLAGS, parse_compile_error
    from .paths import KERNELS_DIR

    cmd = [tool("nvcc"), *NVCC_FLAGS, f"-arch=sm_{arch}", "-cubin", "-I", str(KERNELS_DIR), "-o", str(out), str(source)]
    r = subprocess.run(cmd, capture_output=True, text=True)
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
    r = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True)
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


def functions(cubin: Path) -> dict[str, dict]:
    """Demangled kernel name -> {'sass': [lines], 'registers', 'stack', 'shared', 'local'}."""
    return _functions(str(cubin), Path(cubin).stat().st_mtime)


@functools.lru_cache(maxsize=64)
def _functions(cubin: str, mtime: float) -> dict[str, dict]:
    dump = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    res = subprocess.run([tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
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


def find_kernel(funcs: dict, kernel: str) -> dict:
    """The function whose demangled name is `kernel<...>(...)` (return type and args ignored)."""
    for name, f in funcs.items():
        base = re.sub(r"^void ", "", name)
        if base.startswith(kernel + "(") or base == kernel or base.startswith(kernel + " ("):
            return f
    raise KeyError(f"kernel {kernel!r} not found; kernels: {list(funcs)}")


def cubin(source, arch: str = "90", deps=()) -> Path:
    """The cubin of a .cu file for sm_<arch>, compiled once per content (kept in the build cache,
    named by a hash of the source, `deps`, the shared headers and the flags)."""
    from .build import NVCC_FLAGS, build_key, check_arch
    from .paths import cache_root

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
    from .build import generated
    from .paths import KERNELS_DIR
    from .registry import family_exports

    return cubin(generated(family, family_exports(family)), arch, deps=[KERNELS_DIR / family])


def variant_cubin(op, v, arch: str = "90") -> Path:
    """The cubin holding a variant's kernel: its family's, or an inline variant's own."""
    return cubin(v.source, arch) if v.is_inline else family_cubin(op.source, arch)


def report(op_name: str, arch: str = "90"):
    """Per variant of an op: kernel, registers per thread, widest global load/store (bits), local
    memory bytes (spills). Needs nvcc and cuobjdump, not a GPU."""
    import pandas as pd

    from .registry import get_op

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
