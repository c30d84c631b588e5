"""The explorer's figures: the main one (the metric and time per GPU column, as a sweep or as bars
at one shape) and the roofline (one log-log plot per GPU column, made when first shown). Each keeps
a fixed pool of traces, so every redraw is one plotly_update; figure.py says what each trace shows.
"""
from __future__ import annotations

import ipywidgets as W

from . import figure


def make(gpus: list, roof: bool):
    """A plain Figure (it becomes a FigureWidget after its first draw) and its trace slots per GPU:
    {'s1': [scatter indices], 's2': [...], 'b1': bar index, 'b2': ...} (the roofline: 's1' only)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n, rows = len(gpus), 1 if roof else 2
    fig = make_subplots(rows=rows, cols=n, shared_xaxes="columns", vertical_spacing=0.08, horizontal_spacing=0.06,
                        subplot_titles=(list(gpus) + [""] * (n * (rows - 1))) if n > 1 else None)
    slots = []
    for c in range(1, n + 1):
        s: dict = {}
        for r in range(1, rows + 1):
            s[f"s{r}"] = list(range(len(fig.data), len(fig.data) + figure.POOL))
            for _ in range(figure.POOL):
                fig.add_trace(go.Scatter(visible=False, mode="lines+markers"), row=r, col=c)
            if not roof:
                s[f"b{r}"] = len(fig.data)
                fig.add_trace(go.Bar(visible=False, showlegend=False), row=r, col=c)
        slots.append(s)
    fig.update_layout(height=420 if roof else 560, margin=dict(t=70, l=60, r=20, b=40), template="plotly_white",
                      title=dict(text=""))
    if roof:
        fig.update_xaxes(type="log", title_text="intensity (flop per byte moved)")
        fig.update_yaxes(type="log")
        fig.update_yaxes(title_text="TFLOP/s", col=1)
    return fig, slots


def _fill(specs: list, slot: list, these: list) -> None:
    specs[slot[0]:slot[0] + len(these[:figure.POOL])] = these[:figure.POOL]


def push(fig, specs: list, layout: dict) -> None:
    fig.plotly_update(restyle_data=figure.restyle(specs, [t.type for t in fig.data]), relayout_data=layout,
                      trace_indexes=list(range(len(specs))))


def widget(fig):
    """The drawn figure as a FigureWidget: the first draw goes into the widget's initial state
    (updates sent before the front end has created the widget's model can be lost)."""
    import plotly.graph_objects as go

    return go.FigureWidget(fig)


class Views:
    def __init__(self, gpus: list):
        self.gpus = gpus
        self.fig, self.slots = make(gpus, roof=False)
        self.roof, self.roof_slots = None, []
        self.roof_box = W.Box([], layout=W.Layout(display="none"))

    def draw(self, lines: dict, ceil: dict, m, names: list, title: str, bar_shape: str | None) -> None:
        """lines/ceil per GPU (figure.series / figure.ceilings); bar_shape None: the sweep view."""
        specs, layout = [None] * len(self.fig.data), {"title.text": title}
        for c, gpu in enumerate(self.gpus):
            slots = self.slots[c]
            if bar_shape is not None:
                s1, s2, specs[slots["b1"]], specs[slots["b2"]] = figure.bars(lines[gpu], bar_shape, m, ceil[gpu],
                                                                             c == 0, names)
            else:
                s1, s2 = figure.sweep(lines[gpu], m, ceil[gpu], c == 0, names)
            for key, these in (("s1", s1), ("s2", s2)):
                _fill(specs, slots[key], these)
                tr = self.fig.data[slots[key][0]]
                layout.update(figure.axes_layout("xaxis" + tr.xaxis[1:], "yaxis" + tr.yaxis[1:], key == "s1",
                                                 bar_shape is not None, m, c == 0))
        push(self.fig, specs, layout)

    def draw_roofline(self, lines: dict, facts: dict, names: list, title: str) -> None:
        first = self.roof is None
        if first:
            self.roof, self.roof_slots = make(self.gpus, roof=True)
        specs = [None] * len(self.roof.data)
        for c, gpu in enumerate(self.gpus):
            # a GPU column without rows or ceilings (recorded mode with no data) draws nothing
            _fill(specs, self.roof_slots[c]["s1"],
                  figure.roofline(lines.get(gpu, []), facts.get(gpu) or {}, c == 0, names))
        push(self.roof, specs, {"title.text": title})
        if first:
            self.roof = widget(self.roof)
            self.roof_box.children = [self.roof]

    def show_roofline(self, on: bool) -> None:
        self.roof_box.layout.display = None if on else "none"
