"""Where things live (leaf layer: no torch, no other labkit module but errors).

The kernel sources and the shipped results sit beside the package; builds go to a private cache
folder ($LABKIT_CACHE, else ~/.cache/labkit). Paths reach ninja's command lines, which run through
/bin/sh, so an environment value is accepted only as a plain path (letters, digits and . _ + - / ~)."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
KERNELS_DIR = ROOT / "kernels"
RESULTS_DIR = ROOT / "results"

_SAFE_PATH = re.compile(r"[A-Za-z0-9._+\-/~]+")


def safe_path(value: str, what: str) -> Path:
    """`value` as a Path, or a ConfigError naming `what` and the characters it may hold."""
    if not value or not _SAFE_PATH.fullmatch(value):
        raise ConfigError(f"{what}={value!r} is not a plain path: use letters, digits and . _ + - / ~ only "
                          "(it reaches the build's shell commands)")
    return Path(value).expanduser()


def cache_root() -> Path:
    """The build cache: created private (0700); one owned by another user is refused."""
    env = os.environ.get("LABKIT_CACHE")
    root = safe_path(env, "LABKIT_CACHE") if env else Path.home() / ".cache" / "labkit"
    if not _SAFE_PATH.fullmatch(str(root)):
        raise ConfigError(f"the build cache {str(root)!r} is not a plain path; set LABKIT_CACHE to one")
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = root.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise ConfigError(f"the build cache {root} belongs to another user (uid {st.st_uid}); labkit loads "
                          "libraries only from its own cache: set LABKIT_CACHE to a folder of yours")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"the build cache {root} is writable by others (mode {oct(st.st_mode & 0o777)}); "
                          f"run `chmod 700 {root}` or set LABKIT_CACHE to a private folder")
    return root


def results_dir(root: str | Path | None = None) -> Path:
    """`root`, else $LABKIT_RESULTS, else the repo's results/ folder."""
    return Path(root or os.environ.get("LABKIT_RESULTS") or RESULTS_DIR)


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the folder name under results/)."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a unique temporary file in the same folder, then rename: a
    reader never sees half a file, and two writers (processes, or threads of one process) never
    share a temporary name. A planted link at `path` is replaced, never written through."""
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
