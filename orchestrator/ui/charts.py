"""The spend chart: stacked bars of dollars per day, one colour per group, drawn as SVG by hand
(a few rectangles need no matplotlib, and the base install has none). Served as an image, so
its text is data in an ``<img>``, never markup in the page."""

from __future__ import annotations

from html import escape
from typing import Any

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")
TOP = 9  # groups drawn by name; the rest are "other"


def stacked_bars(cells: list[dict[str, Any]], width: int = 900, height: int = 320) -> str:
    days = sorted({c["day"] for c in cells})
    totals: dict[str, float] = {}
    for c in cells:
        totals[c["key"]] = totals.get(c["key"], 0.0) + c["cost_usd"]
    named = [k for k, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:TOP]]
    keys = named + (["other"] if len(totals) > TOP else [])
    per_day: dict[str, dict[str, float]] = {d: {} for d in days}
    for c in cells:
        k = c["key"] if c["key"] in named else "other"
        per_day[c["day"]][k] = per_day[c["day"]].get(k, 0.0) + c["cost_usd"]
    peak = max((sum(v.values()) for v in per_day.values()), default=0.0) or 1.0
    left, bottom, legend_w = 70, 40, 200
    plot_w, plot_h = width - left - legend_w - 10, height - bottom - 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>']
    for i in range(5):  # the dollar axis
        v = peak * i / 4
        y = 20 + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#e5e5e5"/><text x="{left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">${v:,.4f}</text>')
    if not days:
        out.append(f'<text x="{left + plot_w / 2}" y="{20 + plot_h / 2}" text-anchor="middle">'
                   "no spend in this period</text>")
    slot = plot_w / max(1, len(days))
    bar = max(1.0, slot * 0.8)
    for n, d in enumerate(days):
        x = left + n * slot + (slot - bar) / 2
        y = 20 + plot_h
        for k_i, k in enumerate(keys):
            v = per_day[d].get(k, 0.0)
            if v <= 0:
                continue
            h = plot_h * v / peak
            y -= h
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                       f'fill="{PALETTE[k_i % len(PALETTE)]}"><title>{escape(d)} '
                       f'{escape(k or "(none)")}: ${v:,.4f}</title></rect>')
        if len(days) <= 16 or n % max(1, len(days) // 8) == 0:
            out.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 16}" '
                       f'text-anchor="middle">{escape(d[5:])}</text>')
    for k_i, k in enumerate(keys):
        y = 24 + 18 * k_i
        label = (k or "(none)")[:28]
        out.append(f'<rect x="{width - legend_w}" y="{y - 9}" width="10" height="10" '
                   f'fill="{PALETTE[k_i % len(PALETTE)]}"/><text x="{width - legend_w + 16}" '
                   f'y="{y}">{escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)
