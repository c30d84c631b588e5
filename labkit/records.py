"""Tidy result records: one row per op x variant x dtype x shape x mode, and the files they live in.

A ResultLog appends each row to a JSON-lines file as soon as it is measured: whole lines, fsynced,
on a new line after a torn one, under a lock that keeps a second writer out and is never deleted
(another process may be waiting on it). What to measure is decided on the rows read under that
lock, so a writer that finished meanwhile is not measured again. Readers skip a malformed line or a
row with missing or wrong-typed fields (a killed write, a full disk, a merge conflict) with a warning
naming file and line, and keep the rest; a resume measures the skipped row again. Resume matches rows
by configuration, GPU, commit and stop rule, and says what it skipped.

Shared folders: no file is written through a symbolic link (appends open with O_NOFOLLOW; whole
files go to a new temporary file in the same folder, then are renamed over the name), no read
blocks on a FIFO, and a folder that others may write is warned about (paths.not_private).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import warnings
from pathlib import Path

from filelock import FileLock, Timeout

from . import device, schema
from .energy import per_launch
from .errors import ConfigError, LabkitError
from .paths import not_private, write_atomic

RULE = schema.group("rule")  # a resumed row must have been measured under the same stop rule
SUFFIXES = (".jsonl", ".json", ".csv")


class LogBusy(LabkitError):
    """Another process is writing this results file."""


def check_output(path, suffixes=SUFFIXES, what: str = "output file") -> Path:
    """Validate a path before anything is measured: a known suffix, a regular file or none yet (not a
    folder, a FIFO or a symbolic link), writable. A folder others may write is warned about."""
    p = Path(path)
    if p.suffix not in suffixes:
        raise ConfigError(f"{what} {p}: the suffix must be one of {', '.join(suffixes)}, got {p.suffix or 'none'!r}")
    if p.is_dir():
        raise ConfigError(f"{what} {p} is a folder; give a file name ending in {'/'.join(suffixes)}")
    if p.is_symlink():
        raise ConfigError(f"{what} {p} is a symbolic link: labkit writes no file through a link (in a shared folder "
                          "anyone could have planted it); remove the link or name the file itself")
    if p.exists() and not p.is_file():
        raise ConfigError(f"{what} {p} is not a regular file (a FIFO or a device?); choose another name")
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{what} {p}: cannot create its folder ({e.strerror})") from None
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{what} {p} is not writable")
    why = not_private(parent)
    if why:
        warnings.warn(f"{what} {p}: its folder {parent} {why}: others can replace or remove files there "
                      "(labkit never writes through a link they plant); keep results in a folder only you can write",
                      stacklevel=2)
    return p


class ResultLog:
    """Rows in memory, and (with `path`, a .jsonl file) on disk as they are measured. A file's rows
    are read when first asked for, and again when the lock is taken (lock(), pending(), append())."""

    def __init__(self, path: str | Path | None = None):
        self.path = check_output(path, (".jsonl",), "results file") if path else None
        self._rows: list | None = None if self.path else []
        self._lock = None

    @property
    def rows(self) -> list:
        if self._rows is None:
            self._rows = self._read()
        return self._rows

    def _read(self) -> list:
        return load_rows(self.path, follow=False) if os.path.lexists(self.path) else []

    def lock(self) -> "ResultLog":
        """Keep other writers out until close() (LogBusy names the file), and read the rows on disk:
        what another writer added before, not a view from when this log was opened."""
        if self.path is None or self._lock is not None:
            return self
        lk = FileLock(str(self.path) + ".lock")
        try:
            lk.acquire(timeout=0)
        except Timeout:
            raise LogBusy(f"another labkit process is writing {self.path}; wait for it, or choose another file "
                          "(two writers would measure the same configurations and interleave their rows)") from None
        except OSError as e:
            raise LabkitError(f"cannot take the lock {lk.lock_file} ({e.strerror}); labkit needs it to keep a second "
                              "writer out of the results file (a symbolic link there is refused)") from None
        self._lock = lk
        try:
            self._rows = self._read()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        # the lock file stays: deleting it would let a waiting process lock a file nobody else locks
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def covers(self, rec: dict, cfg, gpus, commit: dict) -> bool:
        return (schema.key(rec) == cfg.key and rec.get("status") in ("ok", "failed") and rec.get("gpu") in gpus
                and rec.get("commit") == commit["commit"] and not commit.get("dirty") and not rec.get("dirty")
                and all(rec.get(k) == getattr(cfg.rule, k) for k in RULE) and rec.get("offset", 0) == cfg.offset)

    def pending(self, configs, gpus=None) -> tuple:
        """(configurations to measure, configurations skipped because a row covers them: same
        configuration, a GPU of this run, this commit (clean tree) and the same stop rule), decided on
        the rows on disk under the lock."""
        self.lock()
        if not self.rows:
            return list(configs), []
        gpus = set(gpus or [g["name"] for g in device.visible_gpus()])
        c = device.commit()
        by_key: dict = {}
        for r in self.rows:
            by_key.setdefault(schema.key(r), []).append(r)
        todo, skipped = [], []
        for cfg in configs:
            done = any(self.covers(r, cfg, gpus, c) for r in by_key.get(cfg.key, ()))
            (skipped if done else todo).append(cfg)
        return todo, skipped

    def append(self, rec: dict) -> None:
        if self.path:
            self.lock()
            _append_line(self.path, json.dumps(rec, default=str) + "\n")
        self.rows.append(rec)

    def frame(self):
        return to_frame(self.rows)


def _append_line(path: Path, line: str) -> None:
    """One whole line at the end of `path`, fsynced. After a torn last line (a killed write) it starts
    a new line, so the torn row alone is lost (and measured again); a failed write is cut off again."""
    try:
        fd = _open_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW)
    except OSError as e:
        raise _write_error(path, e, "labkit appends only to a regular file, never through a symbolic link") from None
    try:
        end = os.fstat(fd).st_size
        data = (b"\n" if end and os.pread(fd, 1, end - 1) != b"\n" else b"") + line.encode()
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)  # we hold the lock: nobody else appended since
            raise
    except OSError as e:
        raise _write_error(path, e, "the rows written before are kept: run the same command again and labkit "
                                    "measures only what is missing") from None
    finally:
        os.close(fd)


def _open_file(path: Path, flags: int) -> int:
    """A descriptor of `path`, which must be a regular file (with O_NOFOLLOW: not a symbolic link).
    O_NONBLOCK: a FIFO planted under the name must not block the open (no effect on a regular file)."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP and flags & os.O_NOFOLLOW and os.path.islink(path):
            raise OSError(errno.ELOOP, "it is a symbolic link", str(path)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"it is {kind}", str(path))
    return fd


def _write_error(path: Path, e: OSError, then: str) -> LabkitError:
    """A failed write as a clear error: the file, why, the free space when the disk is full, and what
    was kept."""
    why = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f"{shutil.disk_usage(path.parent).free / 2**20:.1f} MiB free"
        except OSError:
            free = "free space unknown"
        why += f": the disk (or your quota) holding {path.parent} is full ({free}); free some space"
    return LabkitError(f"could not write {path} ({why}); {then}")


def load_rows(path: str | Path, follow: bool = True) -> list:
    """Rows of a .jsonl / .json / .csv results file. A malformed line, or a row with a missing or
    wrong-typed field, is skipped with a warning naming the file and line. A path that is not a
    readable regular file (a folder, a FIFO, a link loop, no permission; a link unless `follow`) is
    a LabkitError."""
    return [_loop_energy(r, per_launch) for r in _load(Path(path), follow)]


def _loop_energy(row: dict, per_launch) -> dict:
    """A row whose energy was divided over a timed loop (idle time between samples included: see
    labkit.energy.sustained) keeps that figure as `loop_energy_per_sample_j`, never as energy per
    launch or GB/J."""
    if row.get("energy_per_launch_j") and not per_launch(row):
        row = dict(row, loop_energy_per_sample_j=row["energy_per_launch_j"])
        row.pop("energy_per_launch_j")
        row.pop("gb_per_j", None)
    return row


def _load(path: Path, follow: bool) -> list:
    if path.suffix not in SUFFIXES:
        raise ConfigError(f"{path}: result files are .jsonl, .json or .csv")
    try:
        fd = _open_file(path, os.O_RDONLY | (0 if follow else os.O_NOFOLLOW))
    except OSError as e:
        raise LabkitError(f"cannot read the results file {path} ({e.strerror})") from None
    found = []  # (where, row)
    with open(fd, encoding="utf-8", errors="replace", newline="" if path.suffix == ".csv" else None) as f:
        if path.suffix == ".jsonl":
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        found.append((f"{path}:{n}", json.loads(line)))
                    except ValueError as e:
                        _skip(f"{path}:{n}", f"a malformed line ({e})")
        elif path.suffix == ".json":
            try:
                data = json.load(f)
            except ValueError as e:
                raise LabkitError(f"{path}: not valid JSON ({e})") from None
            if not isinstance(data, list):
                raise LabkitError(f"{path}: expected a JSON list of rows")
            found = [(f"{path}: row {n}", r) for n, r in enumerate(data, 1)]
        else:
            found = [(f"{path}:{n}", r) for n, r in enumerate(_read_csv(f), 2)]  # line 1: the header
    rows = []
    for where, r in found:
        why = schema.problem(r)
        if why:
            _skip(where, f"a row that {why}")
        else:
            rows.append(r)
    return rows


def _skip(where: str, what: str) -> None:
    warnings.warn(f"{where}: skipped {what}; the other rows are kept", stacklevel=4)


def _read_csv(f) -> list:
    """CSV rows with the schema's types (labkit.schema.from_csv: a commit like 67179e8 stays a string)."""
    import pandas as pd

    return [schema.from_csv(r) for r in pd.read_csv(f, dtype=str, keep_default_na=False).to_dict("records")]


def to_frame(rows):
    """Rows as a DataFrame: the declared fields first, in the schema's order (labkit.schema.columns),
    then the rest (tuning-axis values) as they come."""
    import pandas as pd

    df, declared = pd.DataFrame(list(rows)), schema.columns()
    cols = [c for c in declared if c in df.columns] + [c for c in df.columns if c not in schema.FIELDS]
    return df[cols] if len(df) else pd.DataFrame(columns=declared)


def save(rows, path: str | Path) -> Path:
    """Write rows as .csv, .json or .jsonl by the file's suffix (write_file: atomic, no link followed)."""
    rows = list(rows)
    if Path(path).suffix == ".csv":
        return write_file(path, lambda f: to_frame(rows).to_csv(f, index=False))
    if Path(path).suffix == ".json":
        return write_file(path, lambda f: json.dump(rows, f, indent=1, default=str))
    return write_file(path, lambda f: f.writelines(json.dumps(r, default=str) + "\n" for r in rows))


def write_file(path, write, suffixes=SUFFIXES, what: str = "output file") -> Path:
    """Write a whole output file with write(f) (f: a text file) through paths.write_atomic: a link
    planted at the name is replaced, never written through, and a failure (a full disk) is a clear
    error that leaves `path` as it was."""
    path = check_output(path, suffixes, what)
    try:
        return write_atomic(path, write)
    except OSError as e:
        raise _write_error(path, e, f"{path} is unchanged") from None
