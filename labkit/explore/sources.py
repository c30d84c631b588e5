"""Where the explorer's rows come from. Both sources take resolved Configs and hand back records
keyed like them (`Config.key` == `schema.key(row)`), so the panel needs no branch per source:

* LiveSource measures through the one run loop (labkit.session.run) in worker processes: an inline
  kernel that faults costs a worker, not the notebook and what it has measured;
* RecordedSource looks rows up in the results recorded on real GPUs (labkit.recorded).

Both also answer what the controls may offer (modes, tuning-axis values, shapes) and the ceilings
of a GPU (`facts`), read from results/<gpu>/device.json without touching the GPU.
"""
from __future__ import annotations

import json
from html import escape

from .. import device, recorded, session, workers
from ..cache_states import ordered
from ..ceilings import in_force
from ..config import make_rule
from ..device import spec
from ..guard import of_row
from ..paths import gpu_slug, results_dir
from ..recorded import banner_html, rows
from ..records import ResultLog
from ..schema import key, newest, split_variant

# interactive: a looser noise target and a short budget per configuration than a sweep's
INTERACTIVE_RULE = dict(noise_target=0.01, min_samples=10, max_samples=500, min_time_s=0.01, budget_s=0.25)


def read_facts(root, gpu: str) -> dict:
    """The measured ceilings of `gpu` from <root>/<slug>/device.json (labkit.ceilings writes it; the
    entry in force), with the datasheet numbers under 'spec'; {'spec': ...} alone where nothing was measured."""
    try:
        devices = json.loads((results_dir(root) / gpu_slug(gpu) / "device.json").read_text()).get("devices", {})
    except (OSError, ValueError):
        devices = {}
    entry = in_force(devices.values(), gpu) or in_force(devices.values()) or {}
    return {"spec": spec(gpu), **entry}


class LiveSource:
    """Measures on this machine's GPU. `ex` is any executor of labkit.session.run
    (`run_group(title, configs)` yielding records; tests pass a fake); default: the shared worker pool
    of the first visible GPU (one GPU, so no curve mixes GPUs). `energy` samples NVML (GB/J)."""

    recorded = False

    def __init__(self, ex=None, energy: bool = False, rule=None):
        self._ex, self.energy = ex, energy
        self.rule = make_rule(rule) if rule is not None else make_rule(**INTERACTIVE_RULE)
        self._facts: dict = {}

    @property
    def ex(self):
        if self._ex is None:
            gpus = device.visible_gpus()
            self._ex = workers.pool([gpus[0]["index"]] if gpus else None, **({"energy": True} if self.energy else {}))
        return self._ex

    def _identities(self) -> list:
        ids = getattr(self.ex, "identities", None)
        return ids() if ids else []

    def gpus(self) -> list[str]:
        return [i["gpu"] for i in self._identities()] or ["this GPU"]

    def header(self) -> str:
        return (f"<b>Live</b>: measuring on {escape(', '.join(self.gpus()))} in a worker process "
                "(a kernel that faults restarts the worker; the panel keeps what it measured)")

    def measure(self, configs: list, on_row, title: str) -> None:
        """Run `configs` (torch baseline first in each group); on_row(record) as each arrives."""
        class Feed(ResultLog):  # the run loop's log, kept in memory, passing rows on as they come
            def append(self, rec):
                super().append(rec)
                on_row(rec)

        session.run(configs, Feed(), ex=self.ex, title=title, progress=False)

    def modes(self, op: str, dtype: str) -> None:
        return None  # live: every mode can be measured

    def axis_values(self, op, name: str) -> list:
        return list(op.axes[name][1])

    def recorded_shapes(self, op: str) -> None:
        return None

    def facts(self, gpu: str) -> dict:
        # the worker measures and writes the ceilings on its first row: read until found, then keep
        f = self._facts.get(gpu) or read_facts(None, gpu)
        if "copy_peak_gbps" in f:
            self._facts[gpu] = f
        return f


class RecordedSource:
    """Rows recorded on real GPUs (labkit.recorded), looked up instead of measured."""

    recorded = True
    rule = None

    def __init__(self, frame=None, error: str | None = None, root=None):
        self.frame, self.error, self.root = frame, error, root
        self.index: dict = {}
        self._facts: dict = {}
        if frame is not None:
            for r in newest(rows(frame)):  # the newest row per configuration and GPU
                self.index.setdefault(key(r), []).append(r)

    @classmethod
    def load(cls, root=None, gpus=None):
        try:
            return cls(recorded.load(root, gpus=gpus), root=root)
        except recorded.NoRecordedData as e:
            return cls(None, str(e), root)

    def gpus(self) -> list[str]:
        return sorted(set(self.frame["gpu"])) if self.frame is not None else ["no recorded data"]

    def header(self) -> str:
        if self.frame is None:
            return ("<div class='lk-recorded' style='border-left:4px solid #dc2626;padding:4px 8px'>"
                    f"<b>Recorded mode, but no recorded data</b> (no GPU on this machine): {escape(self.error or '')}"
                    "</div>")
        return banner_html(self.frame)

    def measure(self, configs: list, on_row, title: str) -> None:
        for cfg in configs:
            for r in self.index.get(cfg.key, ()):
                if "dram_note" not in r:  # the physics guard, for rows recorded before it too
                    r.update(of_row(r, self.facts(r["gpu"])))
                on_row(r)

    def modes(self, op: str, dtype: str) -> list:
        """The cache modes recorded for op and dtype, in the registry's order (labkit.cache_states)."""
        return ordered(k[4] for k in self.index if k[0] == op and k[2] == dtype)

    def axis_values(self, op, name: str) -> list:
        """The default and every value of tuning axis `name` that recorded rows carry."""
        default, values = op.axes[name]
        seen = {default}
        for k in self.index:
            ax = split_variant(k[1])[1] if k[0] == op.name else {}
            if name in ax:
                seen.add(type(default)(ax[name]))
        return [v for v in values if v in seen]

    def recorded_shapes(self, op: str) -> list[str]:
        return list(dict.fromkeys(k[3] for k in self.index if k[0] == op))

    def facts(self, gpu: str) -> dict:
        if gpu not in self._facts:
            self._facts[gpu] = read_facts(self.root, gpu)
        return self._facts[gpu]
