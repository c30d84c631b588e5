"""Where things live (leaf layer: no torch, no other labkit module but errors).

The kernel sources and the shipped results sit beside the package; builds go to a private cache
folder ($LABKIT_CACHE, else ~/.cache/labkit). Paths reach ninja's command lines, which run through
/bin/sh, so an environment value is accepted only as a plain path (letters, digits and . _ + - / ~)."""
from __future__ import annotations

import os
import re
import stat
import tempfile
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
    why = not_private(root)
    if why:
        raise ConfigError(f"the build cache {root} {why}; run `chmod 700 {root}` (if it is yours) or set "
                          "LABKIT_CACHE to a folder of yours (labkit loads libraries only from a private cache)")
    return root


def not_private(folder: Path) -> str | None:
    """Why others could plant, replace or remove files in `folder` (another user owns it, or others
    may write it), or None when only this user can."""
    st = folder.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by others (mode {oct(st.st_mode & 0o777)})"
    return None


def results_dir(root: str | Path | None = None) -> Path:
    """`root`, else $LABKIT_RESULTS, else the repo's results/ folder."""
    return Path(root or os.environ.get("LABKIT_RESULTS") or RESULTS_DIR)


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the folder name under results/)."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")


def write_atomic(path: str | Path, content) -> Path:
    """Write `content` (a str, or a function write(f) of a text file) to `path` through a new
    temporary file of its own in the same folder (a fresh name, created exclusively), fsynced, then
    renamed: a reader never sees half a file, two writers (processes, or threads of one process) never
    share a temporary name, a link planted at `path` is replaced, never written through, and a failure
    (a full disk) leaves `path` as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as f:
            content(f) if callable(content) else f.write(content)
            f.flush()
            os.fchmod(fd, 0o666 & ~_umask())  # as an ordinary open would create it (mkstemp's is 0600)
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
