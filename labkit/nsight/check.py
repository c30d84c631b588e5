"""labkit's times next to Nsight Systems': one row per labkit record with the goal it must meet,
and a plot of the two against each other."""
from __future__ import annotations

from ..cache_states import get as cache_state

GOAL_PCT, GOAL_HOT_US, LONG_US = 3.0, 1.0, 20.0


def goal(mode: str, nsys_us: float) -> tuple[str, float | None]:
    """The agreement goal for one row: (text, tolerance in µs or None when there is none)."""
    if nsys_us != nsys_us:
        return "no kernel", None
    if nsys_us >= LONG_US:
        return f"<= {GOAL_PCT:g} %", nsys_us * GOAL_PCT / 100
    if cache_state(mode).graph:  # a graph sample's time is a mean over many launches
        return f"<= {GOAL_HOT_US:g} µs", GOAL_HOT_US
    # a short cold kernel's time depends on where its buffers sit (add f16 1024²: up to 6 % over 16
    # placements cold, 8-11 % cold-dirty; results/<gpu>/logs/14a09f5edc18/placement.log), and labkit's
    # CUPTI run and the nsys run, though they allocate alike, have read f16x8 1024² cold 5 % apart
    # (results/nvidia-h200/logs/376e5184b2f9/labs-live/06_nsight.txt)
    return "none (cold, < 20 µs)", None


def _number(x) -> float:
    return float(x) if x is not None and x == x else float("nan")


def cross_check(records, kernels):
    """Per timed labkit record (status ok; failed and skipped ones have no time): labkit's median
    time vs the median duration nsys recorded for that variant's kernels in the same config's
    `timed <mode>` phase (summed over the variant's kernels if it launches several per call). Rows
    of `kernels` whose mode / phase is NaN (nsys stats' nvtx_kern_sum pools them) are used for
    every mode; `pass` is then None ('pooled')."""
    import pandas as pd

    cols = ["op", "variant", "dtype", "shape", "mode", "labkit_us", "labkit_kernel_us", "nsys_us", "diff_us",
            "diff_pct", "goal", "result", "pass", "nsys_launches", "kernel", "scope"]
    recs = pd.DataFrame(records)
    if "time_us" not in recs:  # nothing was timed
        return pd.DataFrame(columns=cols)
    ok = recs["status"].fillna("ok") == "ok" if "status" in recs else True
    rows = []
    for _, r in recs[ok & recs["time_us"].notna()].iterrows():
        k = kernels[(kernels["op"] == r["op"]) & (kernels["variant"] == r["variant"]) &
                    (kernels["shape"] == r["shape"]) & kernels["variant_kernel"].astype(bool)]
        k = k[k["dtype"].isna() | (k["dtype"] == r.get("dtype"))]
        exact = k[(k["mode"] == r["mode"]) & (k["phase"] == "timed")]
        pooled = not len(exact)
        k = exact if len(exact) else k[k["mode"].isna() & k["phase"].isna()]
        nsys_us = float(k.groupby("kernel")["median_us"].median().sum()) if len(k) else float("nan")
        text, tol = goal(r["mode"], nsys_us)
        kernel_us = _number(r.get("kernel_us"))
        # the verdict compares kernel durations where labkit measured them (CUPTI), else event times
        diff = (kernel_us if kernel_us == kernel_us else r["time_us"]) - nsys_us
        ok = None if pooled or tol is None else bool(abs(diff) <= tol)
        rows.append({"op": r["op"], "variant": r["variant"], "dtype": r.get("dtype"), "shape": r["shape"],
                     "mode": r["mode"], "labkit_us": r["time_us"], "labkit_kernel_us": kernel_us, "nsys_us": nsys_us,
                     "diff_us": diff, "diff_pct": 100 * diff / nsys_us if nsys_us else float("nan"),
                     "nsys_launches": int(k["launches"].sum()) if len(k) else 0,
                     "kernel": ", ".join(sorted(set(k["kernel"]))), "goal": text,
                     "pass": ok, "result": "pooled" if pooled and len(k) else
                     ("—" if ok is None else "pass" if ok else "MISS"),
                     "scope": ("config range, all phases and modes pooled" if pooled else f"timed {r['mode']}")})
    return pd.DataFrame(rows, columns=cols)


def check_plot(check, title: str = "labkit vs Nsight Systems"):
    """Plotly: labkit's time against nsys's per config (the diagonal is perfect agreement), coloured
    by pass / miss; hover shows the difference. labkit's time is the one the verdict compares: its
    CUPTI kernel time where recorded, else its event time."""
    import plotly.graph_objects as go

    check = check.assign(labkit_us=check["labkit_kernel_us"].fillna(check["labkit_us"]))
    fig = go.Figure()
    colors = {"pass": "#16a34a", "MISS": "#dc2626", "—": "#6b7280", "pooled": "#d97706"}
    for res, g in check.groupby("result"):
        fig.add_trace(go.Scatter(
            x=g["nsys_us"], y=g["labkit_us"], mode="markers", name=res, marker=dict(size=10, color=colors.get(res)),
            text=g["variant"] + " " + g["shape"] + " " + g["mode"],
            customdata=g[["diff_us", "diff_pct", "goal"]],
            hovertemplate="%{text}<br>nsys %{x:.2f} µs, labkit %{y:.2f} µs<br>%{customdata[0]:+.2f} µs "
                          "(%{customdata[1]:+.1f} %), goal %{customdata[2]}<extra></extra>"))
    if len(check):
        both = check[["nsys_us", "labkit_us"]]
        lo, hi = both.min().min() * 0.8, both.max().max() * 1.2
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="equal",
                                 line=dict(dash="dot", color="#999")))
    fig.update_layout(title=title, xaxis_title="Nsight Systems median kernel duration (µs)",
                      yaxis_title="labkit median time (µs): kernel, else events", xaxis_type="log", yaxis_type="log",
                      height=420)
    return fig
