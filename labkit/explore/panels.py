"""The explorer's on-demand panels: the "why is it slow" card (labkit.why) and the machine-code
diff of two variants (labkit.sass_diff.diff_html). Each runs only when its button is pressed, never on
a control change."""
from __future__ import annotations

from html import escape

import ipywidgets as W

from .. import sass_diff
from ..errors import LabkitError
from ..why import why  # the function (labkit.why, the attribute, is the function too)


def _note(text: str, color: str = "#b91c1c") -> str:
    return f"<div style='color:{color}'>{escape(text, quote=False)}</div>"


class WhyPanel:
    """labkit.why.why(op, variant, shape, dtype, recorded=..., mode=...) for the variant, shape and cache
    state shown (the card's headline time is that state's)."""

    def __init__(self, state):
        """`state()` -> dict(op, variant, dtype, shape, mode, recorded): what the panel shows now."""
        self.state = state
        self.button = W.Button(description="why is it slow?", icon="question",
                               tooltip="time vs the nearest ceiling, bytes, machine code, occupancy, hints")
        self.out = W.HTML("<i>pick a variant and a bar shape, then press the button</i>")
        self.button.on_click(lambda b: self.show())
        self.box = W.VBox([self.button, self.out])

    def show(self) -> str:
        s = self.state()
        try:
            card = why(s["op"], s["variant"], s["shape"], s["dtype"], recorded=s["recorded"], mode=s["mode"])
            self.out.value = card._repr_html_()
        except LabkitError as e:
            self.out.value = _note(f"why {s['op']} {s['variant']} {s['shape']}: {e}")
        return self.out.value


class SassPanel:
    """Two variants' SASS side by side (labkit.sass_diff.diff_html), memory instructions aligned."""

    def __init__(self, shown):
        """`shown()` -> (op, dtype) shown now."""
        self.shown = shown
        self.a = W.Dropdown(description="A")
        self.b = W.Dropdown(description="B")
        self.button = W.Button(description="SASS diff", icon="code", tooltip="compiles with nvcc; no GPU needed")
        self.out = W.HTML("")
        self.button.on_click(lambda b: self.show())
        self.box = W.VBox([W.HBox([self.a, self.b, self.button]), self.out])

    def offer(self, names: list, current: str) -> None:
        """The variants to choose from; A = the one shown, B = the next one."""
        if list(self.a.options) != names:
            self.a.options = self.b.options = names
        if names:
            self.a.value = current if current in names else names[0]
            others = [n for n in names if n != self.a.value] or names
            self.b.value = self.b.value if self.b.value in others else others[0]

    def show(self) -> str:
        try:
            op, dtype = self.shown()
            self.out.value = sass_diff.diff_html(op, self.a.value, self.b.value, dtype=dtype)
        except LabkitError as e:  # e.g. nvcc or cuobjdump missing: ToolMissingError says how to get them
            self.out.value = _note(f"SASS diff {self.a.value} vs {self.b.value}: {e}")
        return self.out.value
