"""The report's three charts, drawn by matplotlib (the ``orch[report]`` extra) as inline SVG:
pass rate with its interval, a forest plot of Δ against the baseline, and pass rate against
cost with the Pareto front. Without matplotlib, :func:`draw` returns None."""

from __future__ import annotations

import io
from typing import Any


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: inline in HTML


def draw(stats: dict[str, Any]) -> list[str] | None:
    if not available():
        return None
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "orch-bench"  # same input, same SVG
    from matplotlib.figure import Figure

    rows = stats["rows"]
    names = [r["contestant"] for r in rows]
    return [_pass_rates(Figure, rows, names), _forest(Figure, stats),
            _pareto(Figure, rows, set(stats["pareto"]))]


def _err(value: float, ci: list) -> tuple[float, float]:
    if ci[0] is None:
        return 0.0, 0.0
    return max(0.0, value - ci[0]), max(0.0, ci[1] - value)


def _pass_rates(Figure, rows, names) -> str:
    fig = Figure(figsize=(6, 0.5 + 0.4 * len(rows)))
    ax = fig.subplots()
    values = [100 * (r["pass"]["value"] or 0) for r in rows]
    errs = [_err(v, [None if x is None else 100 * x for x in r["pass"]["ci"]])
            for v, r in zip(values, rows, strict=True)]
    ax.barh(names, values, xerr=list(zip(*errs, strict=True)) if errs else None, capsize=3,
            color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("pass rate, % (95% cluster-bootstrap interval)")
    return _svg(fig)


def _forest(Figure, stats) -> str:
    comps = stats["comparisons"]
    fig = Figure(figsize=(6, 0.8 + 0.4 * max(1, len(comps))))
    ax = fig.subplots()
    for i, c in enumerate(comps):
        d = 100 * (c["delta"] or 0)
        lo, hi = _err(d, [None if x is None else 100 * x for x in c["delta_ci"]])
        color = {"better": "#55a868", "worse": "#c44e52"}.get(c["verdict"], "#777777")
        ax.errorbar([d], [i], xerr=[[lo], [hi]], fmt="o", color=color, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(comps)), [c["contestant"] for c in comps])
    ax.invert_yaxis()
    ax.set_xlabel(f"Δ pass rate vs {stats['baseline']}, points (95% interval)")
    return _svg(fig)


def _pareto(Figure, rows, front) -> str:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    points = [(r["cost_per_trial"]["value"], 100 * (r["pass"]["value"] or 0), r["contestant"])
              for r in rows if r["cost_per_trial"]["value"] is not None]
    for cost, rate, name in points:
        ax.scatter([cost], [rate], color="#c44e52" if name in front else "#4c72b0")
        ax.annotate(name, (cost, rate), textcoords="offset points", xytext=(4, 4), fontsize=8)
    line = sorted((c, r) for c, r, n in points if n in front)
    if line:
        ax.plot([c for c, _ in line], [r for _, r in line], color="#c44e52", linewidth=1)
    ax.set_xlabel("cost per trial, $ (contestants of unknown cost are left out)")
    ax.set_ylabel("pass rate, %")
    ax.set_ylim(0, 100)
    return _svg(fig)
