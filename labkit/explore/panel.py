"""The explorer panel: ipywidgets controls, the state they select, and one update path.

A control change builds the Configs it selects (labkit.config.resolve), asks the source only for
those not seen before (cached by Config.key: op x variant[axes] x dtype x shape x mode) and redraws
the views in place, one plotly_update per figure. Nothing else runs per update: the results table
renders while its pane is open, the why card and the SASS diff when their buttons are pressed.
Every update sits in the NVTX range 'explore <op>'.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import ipywidgets as W

import labkit

from ..errors import LabkitError
from ..ranges import nvtx_range
from ..records import to_frame, write_file
from ..registry import get_op, ops
from ..schema import base_variant, key as row_key, variant_label
from . import choices, figure, text
from .panels import SassPanel, WhyPanel
from .views import Views, widget

MAX_PINS = 4
TABLE, SASS = 0, 2  # panes of the details accordion (1: the why card)
# select() sets these in this order after op/dtype/width (custom before shapes: typing selects "custom")
SETTABLE = ("variant", "mode", "view", "custom", "shapes", "log2", "compare", "bar_shape", "metric", "roofline")


class Explorer:
    def __init__(self, source, op: str | None = None, debounce_s: float = 0.15, export_dir="exports", **select):
        self.source, self.debounce_s, self.export_dir = source, debounce_s, Path(export_dir)
        self.cache: dict = {}          # Config.key -> rows (one per GPU)
        self.pins: list = []           # (label, op, rows)
        self.rows: list = []           # what the views show now
        self.errors, self.notes, self._notes = [], [], []  # _notes: from rebuilding options, shown next update
        self.tuning: dict = {}         # tuning-axis name -> slider (the op's declared axes)
        self.last_update_s = None
        self._hold, self._pending, self._facts, self._ceil = 0, None, {}, {}
        self.gpus = source.gpus()

        lay = W.Layout(width="auto")
        self.op = W.Dropdown(options=list(ops()), value=op or list(ops())[0], description="op")
        self.dtype = W.Dropdown(description="dtype")
        self.mode = W.ToggleButtons(options=choices.modes(), description="cache")
        wide = {"description_width": "initial"}  # the whole label, not "vector wi..."
        self.width = W.SelectionSlider(options=[("1", 1)], description="vector width", continuous_update=False,
                                       style=wide)
        self.variant = W.Dropdown(description="variant")
        self.compare = W.Checkbox(value=False, description="all variants", indent=False, layout=lay)
        self.shapes = W.Dropdown(description="shapes")
        self.log2 = W.IntRangeSlider(value=(20, 26), min=8, max=32, description="log2 elements",
                                     continuous_update=False, style=wide)
        self.custom = W.Text(description="custom", placeholder="e.g. 1024x1024, 4096x4096", continuous_update=False)
        self.axes_box = W.HBox([], layout=W.Layout(display="none"))
        self.view = W.ToggleButtons(options=["sweep", "bar"], description="view")
        self.bar_shape = W.Dropdown(description="bar shape")
        self.metric = W.ToggleButtons(options=["speed", "energy"], description="y axis", layout=W.Layout(display="none"),
                                      tooltips=["GB/s (TFLOP/s for compute-bound ops) and time",
                                                "GB per joule and energy per launch (rows sampled with NVML)"])
        self.roofline = W.Checkbox(value=False, description="roofline", indent=False, layout=lay)
        self.pin_btn = W.Button(description="pin", tooltip="keep this run to compare later", layout=lay)
        self.unpin_btn = W.Button(description="clear pins", layout=lay)
        self.html_btn = W.Button(description="export HTML", icon="download", layout=lay)
        self.csv_btn = W.Button(description="export CSV", icon="download", layout=lay)
        self.progress = W.IntProgress(value=0, min=0, max=1, description="runs", layout=W.Layout(width="320px"))
        self.header = W.HTML(source.header())
        self.message, self.status, self.table = W.HTML(""), W.HTML(""), W.HTML("")
        self.why = WhyPanel(self._shown)
        self.sass = SassPanel(lambda: (self.op.value, self.dtype.value))
        self.details = W.Accordion([self.table, self.why.box, self.sass.box],
                                   titles=("results table", "why is it slow?", "SASS diff"))
        self.views = Views(self.gpus)
        self._placeholder = W.HTML("")  # where the main figure goes once drawn

        for wd in (self.op, self.dtype, self.width):
            wd.observe(self._on_choice, "value")
        for wd in (self.variant, self.compare, self.shapes, self.log2, self.mode, self.view, self.bar_shape, self.metric):
            wd.observe(lambda ch: self.schedule(), "value")
        self.custom.observe(self._on_custom, "value")
        self.roofline.observe(lambda ch: self._draw(roofline_only=True), "value")
        self.details.observe(lambda ch: self._on_details(), "selected_index")
        self.pin_btn.on_click(lambda b: self.pin())
        self.unpin_btn.on_click(lambda b: self.clear_pins())
        self.html_btn.on_click(lambda b: self._export(self.export_html))
        self.csv_btn.on_click(lambda b: self._export(self.export_csv))

        self.panel = W.VBox([
            self.header,
            W.HBox([self.op, self.dtype, self.mode]),
            W.HBox([self.width, self.variant, self.compare]),
            W.HBox([self.shapes, self.log2, self.custom]),
            self.axes_box,
            W.HBox([self.view, self.bar_shape, self.metric, self.roofline]),
            W.HBox([self.pin_btn, self.unpin_btn, self.html_btn, self.csv_btn, self.progress]),
            self.message, self._placeholder, self.views.roof_box, self.status, self.details,
        ])
        self._rebuild("op")
        self._apply(select)  # explore("add", dtype="f16"): the first measurement is of the selection
        self.update()
        self.views.fig = widget(self.views.fig)
        self.panel.children = [self.views.fig if c is self._placeholder else c for c in self.panel.children]

    @property
    def fig(self):
        return self.views.fig

    def _repr_mimebundle_(self, **kw):
        return self.panel._repr_mimebundle_(**kw)

    # ---- drawing -----------------------------------------------------------------------------------
    def _gpu_rows(self, rows, gpu: str) -> list:
        return list(rows) if len(self.gpus) == 1 else [r for r in rows if r.get("gpu") == gpu]

    def _lines(self) -> dict:
        """figure.series per GPU: variants, torch, pins of this op."""
        pins = [(label, rs) for label, op, rs in self.pins if op == self.op.value]
        return {g: figure.series(self._gpu_rows(self.rows, g), [(lb, self._gpu_rows(rs, g)) for lb, rs in pins])
                for g in self.gpus}

    def _metric(self, op) -> figure.Metric:
        return figure.metric(op.bound, self.metric.value == "energy" and figure.has_energy(self.rows))

    def _draw(self, roofline_only: bool = False) -> None:
        op, lines = get_op(self.op.value), self._lines()
        names = [v.name for v in op.variants]
        if not roofline_only:
            self.views.draw(lines, self._ceil, self._metric(op), names, self.title(),
                            self.bar_shape.value if self.view.value == "bar" else None)
        if self.roofline.value:
            t = (f"roofline: {op.name} {self.dtype.value}, {self.mode.value} cache: TFLOP/s vs flop per byte moved"
                 if op.cost.flops else f"roofline: {op.name} has no flop count, so no points (ceilings only)")
            self.views.draw_roofline(lines, self._facts, names, t)
        self.views.show_roofline(self.roofline.value)

    # ---- options: only valid combinations are offered -------------------------------------------
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
                opts = choices.presets(op, self.source.recorded)
                self._set(self.shapes, opts, self.shapes.value if self.shapes.value in opts else
                          "recorded" if self.source.recorded else "preset: seed" if "seed" in op.shape_presets
                          else "default")
                self._tuning_axes(op)
            if level in ("op", "dtype"):
                self._set(self.width, [(str(w), w) for w in op.widths(self.dtype.value)], self.width.value)
                modes = self.source.modes(op.name, self.dtype.value)
                if modes and self.mode.value not in modes:  # e.g. 'hot' kept from an op that had hot rows
                    self._notes.append(f"{op.name} {self.dtype.value}: no {self.mode.value}-cache rows recorded, "
                                       f"showing {modes[0]} (recorded: {', '.join(modes)})")
                    self.mode.value = modes[0]
            vs = [v.name for v in op.variant_by_width(self.dtype.value, self.width.value)]
            # the 128-bit pack is the one to look at first where a width has two variants
            self._set(self.variant, vs, self.variant.value if self.variant.value in vs else vs[-1])

    def _tuning_axes(self, op) -> None:
        """A slider per tuning axis of the op (values the source can show; none if only the default)."""
        for w in self.tuning.values():
            w.close()
        self.tuning = {}
        for name, (default, _) in op.axes.items():
            vals = self.source.axis_values(op, name)
            if len(vals) > 1:
                s = W.SelectionSlider(options=[("auto" if v == 0 else str(v), v) for v in vals], value=default,
                                      description=name, continuous_update=False)  # 0: the kernel's own default
                s.observe(lambda ch: self.schedule(), "value")
                self.tuning[name] = s
        self.axes_box.children = list(self.tuning.values())
        self.axes_box.layout.display = None if self.tuning else "none"

    def inline(self, op: str, name: str, source: str, kernel: str, dtype: str, width: int = 1, block: int = 256):
        """labkit.inline, with the outcome in the panel: on success the new variant is selected (rows
        of an earlier kernel with that name are dropped); a compile error shows and is raised again."""
        try:
            v = labkit.inline(op, name, source, kernel, dtype, width, block)
        except LabkitError as e:
            self._say(f"inline kernel {name!r}: {e}")
            raise
        self.cache = {k: rs for k, rs in self.cache.items() if not (k[0] == op and base_variant(k[1]) == name)}
        self._rebuild("op")
        self.select(op=op, dtype=dtype, variant=v.name)
        return v

    def _on_choice(self, change) -> None:
        if self._hold:
            return
        self._rebuild({self.op: "op", self.dtype: "dtype", self.width: "width"}[change["owner"]])
        self.schedule()

    def _on_custom(self, change) -> None:
        if change["new"].strip() and self.shapes.value != "custom":
            with self.held():  # typing shapes means: show these shapes
                self.shapes.value = "custom"
        self.schedule()

    def _on_details(self) -> None:
        if self.details.selected_index == TABLE:
            self._table()
        elif self.details.selected_index == SASS:
            op = get_op(self.op.value)
            self.sass.offer([v.name for v in op.variants_for(self.dtype.value, include_torch=False)], self.variant.value)

    def select(self, **values) -> None:
        """Set controls from code, e.g. select(op='add', dtype='f16', variant='f16x8', block=512). A
        combination that does not exist shows a message and changes nothing."""
        try:
            self._apply(values)
        except LabkitError as e:
            return self._say(e)
        self.update()  # from code: now, not debounced

    def _apply(self, values: dict) -> None:
        """Set the controls `values` names (ConfigError, nothing changed, for a combination that does not exist)."""
        if not values:
            return
        op = get_op(values.get("op", self.op.value))
        dtype = choices.check_select(op, values, self.dtype.value, SETTABLE)
        with self.held():
            if "op" in values:
                self.op.value = op.name
                self._rebuild("op")
            self.dtype.value = dtype
            self._rebuild("dtype")
            if "width" in values:
                self.width.value = values["width"]
                self._rebuild("width")
            for name in SETTABLE:
                if name in values:
                    getattr(self, name).value = values[name]
            for name in set(values) & set(self.tuning):
                self.tuning[name].value = values[name]

    # ---- running ----------------------------------------------------------------------------------
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
            self._say(f"internal error: {type(e).__name__}: {e}")

    def configs(self, op, shapes) -> list:
        """The Configs shown: torch and the chosen variant (or all of the dtype) per shape."""
        names = ([v.name for v in op.variants_for(self.dtype.value, include_torch=False)] if self.compare.value
                 else [self.variant.value])
        return choices.configs(op, self.dtype.value, self.mode.value, shapes, names,
                               {k: s.value for k, s in self.tuning.items()}, self.source.rule)

    def update(self) -> None:
        t0 = time.perf_counter()
        op = get_op(self.op.value)
        with nvtx_range(f"explore {op.name}"):
            self.errors, self.notes, self._notes = [], self._notes, []
            try:
                shapes = choices.shape_list(op, self.shapes.value, self.dtype.value, self.log2.value,
                                            self.custom.value, self.source.recorded_shapes(op.name))
                shown = self.configs(op, shapes)
            except LabkitError as e:
                return self._say(e)
            with self.held():
                self._set(self.bar_shape, shapes, self.bar_shape.value)
            todo = [c for c in shown if c.key not in self.cache]
            if todo:
                self._measure(op, todo)
            self.rows = [r for c in shown for r in self.cache.get(c.key, [])]
            missing = [c for c in shown if not self.cache.get(c.key)]
            if missing and self.source.recorded:
                self.errors.append(text.not_recorded(missing, len(shown), self.source.modes(op.name, self.dtype.value)))
            self.notes += text.skipped_notes(self.rows)
            self.metric.layout.display = None if figure.has_energy(self.rows) else "none"
            self._facts = {g: figure.complete_facts(self.source.facts(g), self._gpu_rows(self.rows, g)) for g in self.gpus}
            self._ceil = {g: figure.ceilings(f) for g, f in self._facts.items()}
            self._draw()
            if self.details.selected_index == TABLE:
                self._table()
            self.last_update_s = time.perf_counter() - t0
            self._status(op)
            self.message.value = text.message_html(self.errors, self.notes)

    def _measure(self, op, todo: list) -> None:
        self.progress.max, self.progress.value, self.progress.bar_style = len(todo), 0, ""

        def got(rec):
            self.cache.setdefault(row_key(rec), []).append(rec)
            self.progress.value += 1

        try:
            self.source.measure(todo, got, f"explore {op.name}")
        except LabkitError as e:  # e.g. a worker that could not start; what arrived is kept
            self.errors.append(str(e))
        if self.source.recorded:  # looked up: what is absent stays absent
            for c in todo:
                self.cache.setdefault(c.key, [])
        self.progress.bar_style = "warning" if self.errors else "success"

    def _say(self, error) -> None:
        self.message.value = text.message_html([error], [])

    def _variant_s(self) -> str:
        """The variant shown with its tuning-axis values, e.g. 'f16x8_pack[block=512]' (as rows name it)."""
        op = get_op(self.op.value)
        return variant_label(self.variant.value,
                             [(k, s.value) for k, s in sorted(self.tuning.items()) if s.value != op.axes[k][0]])

    def title(self) -> str:
        op = get_op(self.op.value)
        what = "all variants" if self.compare.value else self._variant_s()
        where = f"at {self.bar_shape.value}" if self.view.value == "bar" else "vs size"
        return figure.title(op.name, self.dtype.value, what, self.mode.value, where, self.source.recorded,
                            self._metric(op))

    def _shown(self) -> dict:
        """What the why card describes: the variant shown, at the bar shape, in the cache state shown."""
        return {"op": self.op.value, "variant": self._variant_s(), "dtype": self.dtype.value,
                "shape": self.bar_shape.value, "mode": self.mode.value, "recorded": self.source.recorded}

    # ---- table, status ----------------------------------------------------------------------------
    def frame(self):
        """The rows shown now (plus pinned rows), as a DataFrame with every record column."""
        pinned = [dict(r, pin=label) for label, op, rs in self.pins for r in rs]
        return to_frame(self.rows + pinned)

    def _table(self) -> None:
        self.table.value = text.table_html(self.frame())

    def _status(self, op) -> None:
        m, shape = self._metric(op), self.bar_shape.value
        parts = [(g + (" (recorded)" if self.source.recorded else ""), shape,
                  [r for r in self._gpu_rows(self.rows, g) if r["shape"] == shape], op.bound, m, self._ceil[g])
                 for g in self.gpus]
        self.status.value = text.status_html(parts, self.last_update_s)

    # ---- pins and export --------------------------------------------------------------------------
    def pin(self) -> str:
        rows = [r for r in self.rows if r["variant"] != "torch"]
        if not rows:
            return self._say("nothing to pin: no rows shown") or ""
        what = "all" if self.compare.value else self.variant.value
        label = f"pin{len(self.pins) + 1} {what} {self.dtype.value} {self.mode.value}"
        rows = rows if not self.compare.value else [r for r in rows if r["variant"] == self.variant.value] or rows
        self.pins = (self.pins + [(label, self.op.value, rows)])[-MAX_PINS:]
        self.update()
        return label

    def clear_pins(self) -> None:
        self.pins = []
        self.update()

    def _write(self, path, suffix: str, write) -> Path:
        """records.write_file: a temporary file of its own, renamed; a link planted at the name is not followed."""
        path = path or self.export_dir / f"explore-{self.op.value}-{self.dtype.value}.{suffix}"
        return write_file(path, write, (f".{suffix}",), "export")

    def export_html(self, path=None) -> Path:
        return self._write(path, "html", lambda f: self.fig.write_html(f, include_plotlyjs="cdn"))

    def export_csv(self, path=None) -> Path:
        return self._write(path, "csv", lambda f: self.frame().to_csv(f, index=False))

    def _export(self, fn) -> None:
        try:
            p = fn()
            self.message.value = f"<div style='color:{text.GREEN}'>wrote {p}</div>"
        except Exception as e:
            self._say(f"export failed: {e}")
