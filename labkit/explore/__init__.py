"""The explorer: an ipywidgets panel that picks op, dtype, vector width, shapes, cache mode and
tuning-axis values, measures what changed, and redraws plotly FigureWidgets in place (the sweep or
bars, and a roofline), with a "why is it slow" card and a SASS diff on demand.

    from labkit.explore import explore
    ex = explore("add")          # live on a GPU (worker processes); recorded results without one
    ex                           # shows the panel

Modules: sources (where rows come from: LiveSource, RecordedSource), choices (shapes and Configs
from the controls), figure (rows -> trace specs, pure), views (the FigureWidgets), text (status,
table, messages), panels (why card, SASS diff), panel (the widgets, their state, the update path).
"""
from __future__ import annotations

from .. import device
from ..registry import get_op
from ..remote import connected
from .choices import log2_shapes, parse_shapes
from .panel import Explorer
from .sources import LiveSource, RecordedSource


def explore(op: str | None = None, ex=None, recorded=None, results=None, gpus=None, energy: bool = False,
            **kw) -> Explorer:
    """The explorer panel. Live on a GPU, measuring in the shared worker pool (or through `ex`, any
    executor of labkit.session.run, e.g. a fake in tests; `energy`: sample NVML for GB/J); the
    recorded results without a GPU, or when `recorded=True` (`results`: the folder, default
    results/; `gpus`: slugs or names to keep). `kw`: Explorer's (debounce_s, export_dir) and the
    first selection, as select() takes it: explore("add", dtype="f16", width=8) measures only that."""
    op = get_op(op).name if op is not None else None  # a wrong name is an error before any worker starts
    ex = ex if ex is not None or recorded or results is not None else connected()  # a `labkit serve` box
    if ex is not None:
        source = LiveSource(ex, energy)
    else:
        source = RecordedSource.load(results, gpus) if recorded or results is not None or not device.has_gpu() \
            else LiveSource(energy=energy)
    return Explorer(source, op=op, **kw)


__all__ = ["Explorer", "LiveSource", "RecordedSource", "explore", "log2_shapes", "parse_shapes"]
