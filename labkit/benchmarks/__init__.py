"""The scripts behind README's numbers; each writes a result file with its provenance."""
from __future__ import annotations

import json
from pathlib import Path

from ..paths import write_atomic


def write_json(path, res: dict) -> None:
    """A benchmark's result file (folders made as needed), written whole or not at all (a run cut off
    mid-write leaves the last one); no-op without a path."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(res, indent=1, default=str))
