"""The explorer: an ipywidgets panel that picks op, dtype, vector width, shapes and cache mode, runs
what changed, and redraws a plotly FigureWidget in place.

    from labkit.explore import explore
    ex = explore("add")          # live on a GPU; recorded results (results/) without one
    ex                           # shows the panel

The logic needs no front end: `Explorer` takes a *source* with `measure(op, variant, dtype, shape,
mode) -> list[row]`. `LiveSource` wraps a `Runner` (or anything with the same `.run`), which is how
tests drive the panel with a fake runner; `RecordedSource` looks rows up in recorded results.
Results are cached by (op, variant, dtype, shape, mode), so a control change runs only the
configurations not seen before. Each update sits in the NVTX range 'explore <op>'.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import time
from html import escape
from pathlib import Path

import numpy as np

from .errors import LabkitError
from .ranges import nvtx_range
from .registry import get_op, ops

TABLE_COLUMNS = ["gpu", "variant", "dtype", "shape", "mode", "status", "time_us", "gbps", "pct_peak", "vs_torch",
                 "noise", "samples", "stop_reason", "error"]
POOL = 24          # line slots per subplot (variants + torch + pins + peak); unused slots are hidden
MAX_PINS = 4
PALETTE = ["#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
           "#fecb52"]


# ---- sources ------------------------------------------------------------------------------------
class LiveSource:
    """Measures on this machine's GPU through a Runner (or a stand-in with the same `run`)."""

    recorded = False

    def __init__(self, runner=None):
        if runner is None:
            from .runner import Runner
            from .stats import StopRule

            # interactive: a looser noise target and a short budget per configuration
            runner = Runner(StopRule(noise_target=0.01, min_samples=10, max_samples=500, min_time_s=0.01,
                                     budget_s=0.25))
        self.runner = runner

    def gpus(self) -> list[str]:
        from .device import has_gpu, properties

        gpu = getattr(self.runner, "gpu", None)
        if gpu:
            return [gpu]
        return [properties()["gpu"]] if has_gpu() else ["this GPU"]

    def measure(self, op, variant, dtype, shape, mode) -> list[dict]:
        o = get_op(op)
        return [self.runner.run(o, variant, dtype, o.parse_shape(shape), mode)]

    def recorded_shapes(self, op):
        return None

    def header(self) -> str:
        from .device import has_gpu, properties

        if has_gpu() and not hasattr(self.runner, "gpu"):
            p = properties()
            return f"<b>Live</b>: measuring on {escape(p['gpu'])} (driver {escape(str(p['driver']))})"
        return f"<b>Live</b>: measuring on {escape(', '.join(self.gpus()))}"


class RecordedSource:
    """Rows recorded on real GPUs (labkit.recorded), looked up instead of measured."""

    recorded = True

    def __init__(self, frame=None, error: str | None = None):
        self.frame, self.error = frame, error
        self.index: dict = {}
        if frame is not None:
            from .recorded import rows

            for r in rows(frame):
                self.index.setdefault((r["op"], r["variant"], r["dtype"], r["shape"], r["mode"]), []).append(r)
            for k, rs in self.index.items():  # newest row per GPU
                best = {}
                for r in sorted(rs, key=lambda r: str(r.get("date") or "")):
                    best[r["gpu"]] = r
                self.index[k] = list(best.values())

    @classmethod
    def load(cls, root=None, gpus=None):
        from . import recorded

        try:
            return cls(recorded.load(root, gpus=gpus))
        except recorded.NoRecordedData as e:
            return cls(None, str(e))

    def gpus(self) -> list[str]:
        return sorted(set(self.frame["gpu"])) if self.frame is not None else ["no recorded data"]

    def measure(self, op, variant, dtype, shape, mode) -> list[dict]:
        return list(self.index.get((op, variant, dtype, shape, mode), []))

    def recorded_shapes(self, op) -> list[str]:
        if self.frame is None:
            return []
        return list(dict.fromkeys(self.frame.loc[self.frame["op"] == op, "shape"]))

    def header(self) -> str:
        if self.frame is None:
            return ("<div class='lk-recorded' style='border-left:4px solid #dc2626;padding:4px 8px'>"
                    f"<b>Recorded mode, but no recorded data</b> (no GPU on this machine): {escape(self.error or '')}"
                    "</div>")
        from .recorded import banner_html

        return banner_html(self.frame)


# ---- shapes -------------------------------------------------------------------------------------
def log2_shapes(op, lo: int, hi: int) -> list[tuple]:
    """Shapes with 2^p elements for p in [lo, hi], split as evenly as the op's axes allow."""
    out = []
    for p in range(lo, hi + 1):
        n = len(op.shape_axes)
        parts = [p // n + (1 if k < p % n else 0) for k in range(n)][::-1]
        out.append(tuple(1 << q for q in parts))
    return out


def parse_shapes(op, text: str) -> list[tuple]:
    """'1024x1024, 4096x4096' (or ';') -> shapes; raises ConfigError on bad or empty input."""
    from .errors import ConfigError

    parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"empty sweep: type one or more {op.name} shapes, e.g. "
                          f"{', '.join(op.format_shape(s) for s in op.default_shapes[:2])}")
    return [op.parse_shape(p) for p in parts]


def _nan(x):
    return float("nan") if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


# ---- the panel ----------------------------------------------------------------------------------
class Explorer:
    def __init__(self, source, op: str | None = None, debounce_s: float = 0.15, export_dir="exports"):
        import ipywidgets as W

        self.source, self.debounce_s, self.export_dir = source, debounce_s, Path(export_dir)
        self.cache: dict = {}          # (op, variant, dtype, shape, mode) -> list of rows
        self.calls: list = []          # every configuration measured, in order (what a change re-ran)
        self.pins: list = []           # (label, op, rows)
        self.rows: list = []           # what the figure and table show now
        self.errors: list = []
        self.last_update_s = None
        self._hold, self._pending = 0, None
        self.gpus = source.gpus()

        lay = W.Layout(width="auto")
        self.op = W.Dropdown(options=list(ops()), value=op or list(ops())[0], description="op")
        self.dtype = W.Dropdown(description="dtype")
        self.width = W.SelectionSlider(options=[("1", 1)], description="vector width", continuous_update=False)
        self.variant = W.Dropdown(description="variant")
        self.compare = W.Checkbox(value=False, description="all variants", indent=False, layout=lay)
        self.shapes = W.Dropdown(description="shapes")
        self.log2 = W.IntRangeSlider(value=(20, 26), min=8, max=32, description="log2 elements",
                                     continuous_update=False)
        self.custom = W.Text(description="custom", placeholder="e.g. 1024x1024, 4096x4096", continuous_update=False)
        self.mode = W.ToggleButtons(options=["cold", "hot"], description="cache")
        self.view = W.ToggleButtons(options=["sweep", "bar"], description="view")
        self.bar_shape = W.Dropdown(description="bar shape")
        self.pin_btn = W.Button(description="pin", tooltip="keep this run to compare later", layout=lay)
        self.unpin_btn = W.Button(description="clear pins", layout=lay)
        self.html_btn = W.Button(description="export HTML", icon="download", layout=lay)
        self.csv_btn = W.Button(description="export CSV", icon="download", layout=lay)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="runs", layout=W.Layout(width="320px"))
        self.header = W.HTML(source.header())
        self.message = W.HTML("")
        self.status = W.HTML("")
        self.table = W.HTML("")
        self.fig = self._make_figure()  # a plain Figure until the first draw, then a FigureWidget
        self._placeholder = W.HTML("")

        for wd in (self.op, self.dtype, self.width):
            wd.observe(self._on_choice, "value")
        for wd in (self.variant, self.compare, self.shapes, self.log2, self.custom, self.mode, self.view,
                   self.bar_shape):
            wd.observe(lambda ch: self.schedule(), "value")
        self.pin_btn.on_click(lambda b: self.pin())
        self.unpin_btn.on_click(lambda b: self.clear_pins())
        self.html_btn.on_click(lambda b: self._export(self.export_html))
        self.csv_btn.on_click(lambda b: self._export(self.export_csv))

        self.panel = W.VBox([
            self.header,
            W.HBox([self.op, self.dtype, self.mode]),
            W.HBox([self.width, self.variant, self.compare]),
            W.HBox([self.shapes, self.log2, self.custom]),
            W.HBox([self.view, self.bar_shape]),
            W.HBox([self.pin_btn, self.unpin_btn, self.html_btn, self.csv_btn, self.progress]),
            self.message, self._placeholder, self.status, W.Accordion([self.table], titles=("results table",)),
        ])
        self._rebuild("op")
        self.update()
        # the first draw goes into the widget's initial state: updates sent before the front end
        # has created the widget's model can be lost, so the widget starts complete
        import plotly.graph_objects as go

        self.fig = go.FigureWidget(self.fig)
        self.panel.children = [self.fig if c is self._placeholder else c for c in self.panel.children]

    def _repr_mimebundle_(self, **kw):
        return self.panel._repr_mimebundle_(**kw)

    # ---- figure: a fixed pool of traces per GPU column, so every redraw is one batch_update ----
    def _make_figure(self):
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        n = len(self.gpus)
        base = make_subplots(rows=2, cols=n, shared_xaxes="columns", vertical_spacing=0.08, horizontal_spacing=0.06,
                             subplot_titles=[g for g in self.gpus] + [""] * n if n > 1 else None)
        self._slots = []
        for c in range(1, n + 1):
            slots = {"s1": [], "s2": []}
            for row, key in ((1, "s1"), (2, "s2")):
                for _ in range(POOL):
                    slots[key].append(len(base.data))
                    base.add_trace(go.Scatter(visible=False, mode="lines+markers"), row=row, col=c)
            for row, key in ((1, "b1"), (2, "b2")):
                slots[key] = len(base.data)
                base.add_trace(go.Bar(visible=False, showlegend=False), row=row, col=c)
            self._slots.append(slots)
        base.update_layout(height=560, margin=dict(t=70, l=60, r=20, b=40), legend=dict(orientation="v"),
                           template="plotly_white", title=dict(text=""))
        return base

    # ---- option rebuilding: only valid combinations are offered --------------------------------
    @contextlib.contextmanager
    def held(self):
        """Changes inside are applied as one update at the end (no re-run per widget)."""
        self._hold += 1
        try:
            yield
        finally:
            self._hold -= 1

    def _set(self, widget, options, prefer):
        values = [o[1] if isinstance(o, tuple) else o for o in options]
        widget.options = options
        widget.value = prefer if prefer in values else (values[-1] if widget is self.bar_shape else values[0])

    def _rebuild(self, level: str) -> None:
        op = get_op(self.op.value)
        with self.held():
            if level == "op":
                self._set(self.dtype, op.dtypes, self.dtype.value)
                presets = ["default"] + [f"preset: {k}" for k in op.shape_presets] + ["log2 range", "custom"]
                if self.source.recorded:
                    presets = ["recorded"] + presets
                self._set(self.shapes, presets, self.shapes.value if self.shapes.value in presets else
                          ("recorded" if self.source.recorded else ("preset: seed" if "seed" in op.shape_presets
                                                                     else "default")))
            if level in ("op", "dtype"):
                ws = op.widths(self.dtype.value)
                self._set(self.width, [(str(w), w) for w in ws], self.width.value)
            vs = [v.name for v in op.variant_by_width(self.dtype.value, self.width.value)]
            # the 128-bit pack is the one to look at first where a width has two variants
            self._set(self.variant, vs, self.variant.value if self.variant.value in vs else vs[-1])

    def refresh(self) -> None:
        """Re-read the registry (e.g. after labkit.inline added a variant) and redraw."""
        self._rebuild("op")
        self.schedule()

    def inline(self, op: str, name: str, source: str, kernel: str, dtype: str, width: int = 1, block: int = 256):
        """labkit.inline, with the outcome in the panel: on success the new variant is selected; a
        compile error (file:line in the user's source) shows as a message and is raised again."""
        import labkit

        try:
            v = labkit.inline(op, name, source, kernel, dtype, width, block)
        except LabkitError as e:
            self._message(f"inline kernel {name!r}: {e}")
            raise
        self._rebuild("op")
        self.select(op=op, dtype=dtype, variant=v.name)
        return v

    def _on_choice(self, change) -> None:
        if self._hold:
            return
        self._rebuild({self.op: "op", self.dtype: "dtype", self.width: "width"}[change["owner"]])
        self.schedule()

    def select(self, **values) -> None:
        """Set controls from code, e.g. select(op='add', dtype='f16', variant='f16x8'). A combination
        that does not exist shows a message and changes nothing."""
        try:
            op = get_op(values.get("op", self.op.value))
            dtype = values.get("dtype", self.dtype.value if self.dtype.value in op.dtypes else op.dtypes[0])
            op.variants_for(dtype)
            if "variant" in values:
                values.setdefault("width", op.variant(values["variant"], dtype).width)
            if "width" in values:
                op.variant_by_width(dtype, values["width"])
        except LabkitError as e:
            self._message(e)
            return
        with self.held():
            if "op" in values:
                self.op.value = op.name
                self._rebuild("op")
            self.dtype.value = dtype
            self._rebuild("dtype")
            if "width" in values:
                self.width.value = values["width"]
                self._rebuild("width")
            for name in ("variant", "mode", "view", "shapes", "log2", "custom", "compare", "bar_shape"):
                if name in values:
                    getattr(self, name).value = values[name]
        self.update()  # from code: now, not debounced

    # ---- running --------------------------------------------------------------------------------
    def schedule(self) -> None:
        """Debounced update: a burst of control changes runs once, `debounce_s` after the last."""
        if self._hold:
            return
        if self.debounce_s <= 0:
            return self.update()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self.update()
        if self._pending is not None:
            self._pending.cancel()
        self._pending = loop.call_later(self.debounce_s, self._fire)

    def _fire(self):
        self._pending = None
        try:
            self.update()
        except Exception as e:  # keep the panel usable whatever happened
            self._message(f"internal error: {type(e).__name__}: {e}")

    def shape_list(self) -> list[str]:
        op = get_op(self.op.value)
        choice = self.shapes.value
        if choice == "recorded":
            shapes = self.source.recorded_shapes(op.name)
            if not shapes:
                from .errors import ConfigError

                raise ConfigError(f"no recorded data for {op.name}: nothing under results/ covers this op")
            return shapes
        if choice == "log2 range":
            shapes = log2_shapes(op, *self.log2.value)
        elif choice == "custom":
            shapes = parse_shapes(op, self.custom.value)
        elif choice.startswith("preset: "):
            shapes = op.shape_presets[choice[len("preset: "):]]
        else:
            shapes = op.default_shapes
        shapes = sorted(dict.fromkeys(shapes), key=lambda s: (op.bytes_moved(s, self.dtype.value), s))
        return [op.format_shape(s) for s in shapes]

    def configs(self, shapes) -> list[tuple]:
        """(op, variant, dtype, shape, mode) to show: the chosen variant (or all of this dtype) and
        torch, torch first for each shape so ratios to torch are available."""
        op = get_op(self.op.value)
        names = ([v.name for v in op.variants_for(self.dtype.value, include_torch=False)]
                 if self.compare.value else [self.variant.value])
        return [(op.name, v, self.dtype.value, s, self.mode.value) for s in shapes for v in ["torch", *names]]

    def update(self) -> None:
        t0 = time.perf_counter()
        op = self.op.value
        with nvtx_range(f"explore {op}"):
            self.errors = []
            try:
                shapes = self.shape_list()
            except LabkitError as e:
                self._message(e)
                return
            with self.held():
                self._set(self.bar_shape, shapes, self.bar_shape.value)
            keys = self.configs(shapes)
            todo = [k for k in keys if k not in self.cache]
            self.progress.max, self.progress.value = max(1, len(todo)), 0
            self.progress.bar_style = ""
            failed_shapes = set()
            for k in todo:
                if k[3] in failed_shapes:  # a ConfigError for a shape (e.g. too large) holds for all variants
                    continue
                try:
                    self.calls.append(k)
                    self.cache[k] = self.source.measure(*k)
                except LabkitError as e:
                    self.errors.append(f"{k[1]} {k[3]}: {e}")
                    failed_shapes.add(k[3])
                self.progress.value += 1
            self.progress.bar_style = "success" if not self.errors else "warning"
            self.rows = [r for k in keys for r in self.cache.get(k, [])]
            missing = [k for k in keys if k in self.cache and not self.cache[k]]
            if missing and self.source.recorded:
                ex = ", ".join(f"{k[1]} {k[3]}" for k in missing[:3])
                self.errors.append(f"not recorded: {len(missing)} of {len(keys)} configurations "
                                   f"({ex}{' …' if len(missing) > 3 else ''}) for {op} {self.dtype.value} {self.mode.value}")
            self._draw()
            self._table()
            self.last_update_s = time.perf_counter() - t0
            self._status()
            self._message("<br>".join(escape(e, quote=False) for e in self.errors[:5]), raw=True)

    def _message(self, text, raw=False) -> None:
        if not raw:
            text = escape(str(text), quote=False)
        self.message.value = f"<div class='lk-message' style='color:#b91c1c'>{text}</div>" if text else ""

    # ---- drawing --------------------------------------------------------------------------------
    def _color(self, variant: str) -> str:
        names = [v.name for v in get_op(self.op.value).variants]
        return "#222222" if variant == "torch" else PALETTE[names.index(variant) % len(PALETTE)] \
            if variant in names else "#888888"

    def _gpu_rows(self, rows, gpu: str) -> list[dict]:
        return list(rows) if len(self.gpus) == 1 else [r for r in rows if r.get("gpu") == gpu]

    def _series(self, gpu: str) -> list[tuple]:
        """(label, variant, dash, rows) per line, for one GPU: variants, torch, pins."""
        rows = self._gpu_rows(self.rows, gpu)
        variants = list(dict.fromkeys(r["variant"] for r in rows))
        variants = [v for v in variants if v != "torch"] + (["torch"] if "torch" in variants else [])
        out = [(v, v, "dash" if v == "torch" else "solid", [r for r in rows if r["variant"] == v]) for v in variants]
        for label, op, rs in self.pins:
            if op == self.op.value and rs:
                out.append((label, rs[0]["variant"], "dot", self._gpu_rows(rs, gpu)))
        return out

    def _peak(self, rows) -> float | None:
        vals = [r["peak_gbps"] for r in rows if r.get("peak_gbps") and r["peak_gbps"] == r["peak_gbps"]]
        return float(np.median(vals)) if vals else None

    def title(self) -> str:
        what = "all variants" if self.compare.value else self.variant.value
        where = f"at {self.bar_shape.value}" if self.view.value == "bar" else "vs size"
        src = "recorded" if self.source.recorded else "live"
        return f"{self.op.value} {self.dtype.value}: {what} vs torch, {self.mode.value} cache, {where} ({src})"

    def _draw(self) -> None:
        fig, bar = self.fig, self.view.value == "bar"
        specs, layout = [None] * len(fig.data), {"title.text": self.title()}
        for c, gpu in enumerate(self.gpus):
            slots = self._slots[c]
            series = self._series(gpu)
            gpu_rows = self._gpu_rows(self.rows, gpu)
            peak = self._peak(gpu_rows)
            s1, s2 = [], []  # trace property dicts for the line slots
            if not bar:
                for label, v, dash, rs in series:
                    rs = sorted(rs, key=lambda r: r["bytes"])
                    if not rs:
                        continue
                    x = np.array([r["bytes"] for r in rs], dtype=float)
                    ok = [r.get("status") == "ok" for r in rs]
                    gb = np.array([_nan(r.get("gbps")) if o else np.nan for r, o in zip(rs, ok)])
                    us = np.array([_nan(r.get("time_us")) if o else np.nan for r, o in zip(rs, ok)])
                    text = [r["shape"] if o else f"{r['shape']} {str(r.get('status')).upper()}" for r, o in zip(rs, ok)]
                    common = dict(x=x, name=label, legendgroup=label, showlegend=c == 0, text=text, visible=True,
                                  mode="lines+markers", line=dict(color=self._color(v), dash=dash))
                    s1.append(dict(common, y=gb, hovertemplate="%{text}: %{y:.1f} GB/s<extra>" + label + "</extra>"))
                    s2.append(dict(common, y=us, showlegend=False,
                                   hovertemplate="%{text}: %{y:.2f} µs<extra>" + label + "</extra>"))
                if peak and self.rows:
                    xs = [r["bytes"] for r in gpu_rows]
                    s1.append(dict(x=np.array([min(xs), max(xs)], dtype=float), y=np.array([peak, peak]),
                                   name="copy peak (measured)", legendgroup="peak", showlegend=c == 0, visible=True,
                                   mode="lines", text=None, line=dict(color="#999999", dash="dot"),
                                   hovertemplate=f"copy peak {peak:.0f} GB/s<extra></extra>"))
                b1 = b2 = dict(visible=False)
            else:
                at = [(label, v, next((r for r in rs if r["shape"] == self.bar_shape.value), None))
                      for label, v, dash, rs in series]
                at = [(label, v, r) for label, v, r in at if r is not None]
                labels = [a[0] for a in at]
                ok = [r.get("status") == "ok" for _, _, r in at]
                gb = np.array([_nan(r.get("gbps")) if o else 0.0 for (_, _, r), o in zip(at, ok)])
                us = np.array([_nan(r.get("time_us")) if o else 0.0 for (_, _, r), o in zip(at, ok)])
                colors = [self._color(v) for _, v, _ in at]
                txt1 = [f"{g:.0f}" if o else str(r.get("status")).upper() for g, o, (_, _, r) in zip(gb, ok, at)]
                txt2 = [f"{u:.1f}" if o else str(r.get("status")).upper() for u, o, (_, _, r) in zip(us, ok, at)]
                b1 = dict(visible=True, x=labels, y=gb, text=txt1, marker=dict(color=colors),
                          hovertemplate="%{x}: %{y:.1f} GB/s<extra></extra>")
                b2 = dict(visible=True, x=labels, y=us, text=txt2, marker=dict(color=colors),
                          hovertemplate="%{x}: %{y:.2f} µs<extra></extra>")
                torch_r = next((r for _, v, r in at if v == "torch" and r.get("status") == "ok"), None)
                ends = [labels[0], labels[-1]] if labels else []
                if torch_r and ends:
                    line = dict(x=ends, mode="lines", name="torch", legendgroup="torch", showlegend=c == 0,
                                visible=True, text=None, line=dict(color="#222222", dash="dash"))
                    s1.append(dict(line, y=np.array([torch_r["gbps"]] * 2), hovertemplate="torch<extra></extra>"))
                    s2.append(dict(line, y=np.array([torch_r["time_us"]] * 2), showlegend=False,
                                   hovertemplate="torch<extra></extra>"))
                if peak and ends:
                    s1.append(dict(x=ends, y=np.array([peak, peak]), mode="lines", name="copy peak (measured)",
                                   legendgroup="peak", showlegend=c == 0, visible=True, text=None,
                                   line=dict(color="#999999", dash="dot"), hovertemplate=f"copy peak {peak:.0f} GB/s<extra></extra>"))
            for key, these in (("s1", s1), ("s2", s2)):
                for k, idx in enumerate(slots[key]):
                    specs[idx] = these[k] if k < len(these) else dict(visible=False)
            specs[slots["b1"]], specs[slots["b2"]] = b1, b2
            for idx in (slots["s1"][0], slots["s2"][0]):
                xa, ya = "xaxis" + fig.data[idx].xaxis[1:], "yaxis" + fig.data[idx].yaxis[1:]
                top = idx == slots["s1"][0]
                layout.update({f"{xa}.type": "category" if bar else "log",
                               f"{xa}.title.text": None if bar or top else "bytes moved (read + written)",
                               f"{ya}.type": "linear" if bar or top else "log",
                               f"{ya}.title.text": None if c else ("GB/s" if top else "time (µs)")})
        self._push(specs, layout)

    def _push(self, specs, layout) -> None:
        """One plotly_update for every trace and the layout. Each key is given explicitly for every
        trace that uses it: a key left out for some traces of a multi-trace update reaches the front
        end as undefined and erases what it showed."""
        fig = self.fig
        flat = []
        for spec, tr in zip(specs, fig.data):
            f = {"visible": False, "x": np.array([]), "y": np.array([]), "name": "", "legendgroup": "",
                 "showlegend": False, "text": [], "hovertemplate": "", "marker.color": "#888888"}
            if tr.type == "scatter":
                f.update({"mode": "lines", "line.color": "#888888", "line.dash": "solid"})
            for k, v in spec.items():
                if isinstance(v, dict):
                    f.update({f"{k}.{kk}": vv for kk, vv in v.items()})
                else:
                    f[k] = v if v is not None else ([] if k == "text" else v)
            if tr.type == "scatter":
                f["marker.color"] = f["line.color"]
            flat.append(f)
        keys = list(dict.fromkeys(k for f in flat for k in f))
        from plotly.basedatatypes import Undefined  # plotly's "leave as is": only for keys a trace type lacks



        restyle = {k: [f.get(k, Undefined) for f in flat] for k in keys}
        fig.plotly_update(restyle_data=restyle, relayout_data=layout, trace_indexes=list(range(len(flat))))

    # ---- table, status --------------------------------------------------------------------------
    def frame(self):
        """The rows shown now (plus pinned rows), as a DataFrame with every record column."""
        from .records import to_frame

        pinned = [dict(r, pin=label) for label, op, rs in self.pins for r in rs]
        return to_frame(self.rows + pinned)

    def _table(self) -> None:
        df = self.frame()
        cols = [c for c in TABLE_COLUMNS + ["pin"] if c in df.columns]
        self.table.value = df[cols].to_html(index=False, na_rep="", float_format=lambda x: f"{x:.4g}",
                                            classes="lk-table", border=0) if len(df) else "<i>no rows</i>"

    def _status(self) -> None:
        parts = []
        for gpu in self.gpus:
            rows = [r for r in self._gpu_rows(self.rows, gpu) if r["shape"] == self.bar_shape.value]
            items = []
            for r in rows:
                if r.get("status") != "ok":
                    items.append(f"<b>{escape(r['variant'])}</b> <span style='color:#b91c1c'>"
                                 f"{escape(str(r.get('status')).upper())}</span>: {escape(str(r.get('error') or ''))[:120]}")
                    continue
                pct = f", {r['pct_peak']:.0f}% of peak" if r.get("pct_peak") else ""
                noise = f", noise {100 * r['noise']:.1f}%" if r.get("noise") is not None else ""
                stop = f" ({escape(str(r['stop_reason']))})" if r.get("stop_reason") else ""
                items.append(f"<b>{escape(r['variant'])}</b> ok {r['time_us']:.2f} µs, {r['gbps']:.0f} GB/s{pct}{noise}{stop}")
            dev = escape(gpu) + (" (recorded)" if self.source.recorded else "")
            parts.append(f"<div>{dev} @ {escape(str(self.bar_shape.value))}: " + (" · ".join(items) or "no rows") + "</div>")
        took = f"<div style='color:#666'>updated in {self.last_update_s:.2f} s</div>" if self.last_update_s else ""
        self.status.value = "<div class='lk-status'>" + "".join(parts) + took + "</div>"

    # ---- pins and export ------------------------------------------------------------------------
    def pin(self) -> str:
        rows = [r for r in self.rows if r["variant"] != "torch"]
        if not rows:
            self._message("nothing to pin: no rows shown")
            return ""
        what = "all" if self.compare.value else self.variant.value
        label = f"pin{len(self.pins) + 1} {what} {self.dtype.value} {self.mode.value}"
        rows = rows if not self.compare.value else [r for r in rows if r["variant"] == self.variant.value] or rows
        self.pins = (self.pins + [(label, self.op.value, rows)])[-MAX_PINS:]
        self.update()
        return label

    def clear_pins(self) -> None:
        self.pins = []
        self.update()

    def export_html(self, path=None) -> Path:
        path = Path(path or self.export_dir / f"explore-{self.op.value}-{self.dtype.value}.html")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fig.write_html(str(path), include_plotlyjs="cdn")
        return path

    def export_csv(self, path=None) -> Path:
        path = Path(path or self.export_dir / f"explore-{self.op.value}-{self.dtype.value}.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.frame().to_csv(path, index=False)
        return path

    def _export(self, fn) -> None:
        try:
            p = fn()
            self.message.value = f"<div style='color:#166534'>wrote {escape(str(p))}</div>"
        except Exception as e:
            self._message(f"export failed: {e}")


def explore(op: str | None = None, runner=None, recorded=None, results=None, gpus=None, **kw) -> Explorer:
    """The explorer panel. Live on a GPU (or with `runner`, e.g. a fake one in tests); recorded
    results without one, or when `recorded=True` (`results`: the folder, default results/;
    `gpus`: slugs or names to keep)."""
    from .device import has_gpu

    if runner is not None:
        source = LiveSource(runner)
    elif recorded or results is not None or not has_gpu():
        source = RecordedSource.load(results, gpus)
    else:
        source = LiveSource()
    return Explorer(source, op=op, **kw)
