"""The scripts behind README's numbers; each writes a result file with its provenance."""
from __future__ import annotations

import json
from pathlib import Path


def write_json(path, res: dict) -> None:
    """A benchmark's result file (folders made as needed); no-op without a path."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(res, indent=1, default=str))
