"""``report.md`` and a self-contained ``report.html`` (inline style, no scripts, no links out)
from the run document and the tally. Model text is rendered with raw HTML switched off, so a
review cannot inject markup into the page."""

from __future__ import annotations

import html
from typing import Any

from orchestrator.council.tally import CONCURRENCE_LINE, SEVERITIES, TIERS


def _cell(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def _money(value: float | None, exact: bool = True) -> str:
    if value is None:
        return "unknown"
    return f"${value:.4f}" + ("" if exact else " (a floor: some costs are unknown)")


def report_markdown(doc: dict[str, Any], tally: dict[str, Any] | None,
                    synthesis: str | None) -> str:
    verdict = doc.get("verdict")
    chair = (doc.get("chair") or {}).get("model")
    lines = [f"# Council review {doc['run_id']}", ""]
    if verdict:
        lines.append(f"**Verdict: {verdict}** (chair {chair})")
    else:
        lines.append(f"**No verdict** (status {doc['status']})")
    lines += ["", f"> {CONCURRENCE_LINE}", ""]
    lines += ["## Seats", "", "| Seat | Label | Review | Findings (blocker/major/minor/nit) "
              "| Confirmed | Street-cred | Block |", "|---|---|---|---|---|---|---|"]
    for s in doc["seats"]:
        counts = "/".join(str(s["findings"].get(k, 0)) for k in SEVERITIES)
        review = s["status"] + (" · CUT" if s.get("cut") else "") + (
            " · retried" if s.get("retried") else "")
        block = ("conformed" + (f" ({s['source']})" if s.get("source") else "")
                 if s.get("conformed") else ("non-conforming" if s["status"] == "reviewed"
                                             else "—"))
        cred = "—" if s.get("street_cred") is None else f"{s['street_cred']:g}"
        lines.append(f"| {_cell(s['model'])} | {_cell(s.get('label') or '—')} | {review} | "
                     f"{counts} | {s.get('confirmed', 0)} | {cred} | {block} |")
    lines += ["", "Street-cred is the mean rank a seat's review got from its peers (1 = best).", ""]
    if tally:
        lines += ["## Findings by tier", "",
                  " · ".join(f"{tally['tiers'][t]} {t}" for t in TIERS), ""]
        for t in TIERS:
            groups = [g for g in tally["groups"] if g["tier"] == t]
            if not groups:
                continue
            lines += [f"### {t.capitalize()} ({len(groups)})", "",
                      "| Findings | Severity | Location | Claim | Raised by | Agree | Dispute "
                      "| Neutral |", "|---|---|---|---|---|---|---|---|"]
            for g in groups:
                c = g["counts"]
                lines.append(f"| {', '.join(g['findings'])} | {g['severity']} | "
                             f"{_cell(g['location']) or '—'} | {_cell(g['claim'])} | "
                             f"{_cell(', '.join(g['seats']))} | {c['agree']} | {c['dispute']} | "
                             f"{c['neutral']} |")
            lines.append("")
        dissent = [(g, v) for g in tally["groups"] for v in g["votes"]
                   if g["tier"] in ("contested", "disputed") and v["vote"] != "neutral"]
        if dissent:
            lines += ["### Dissent", ""]
            lines += [f"- {v['finding']} ({g['tier']}) — {v['judge']} votes {v['vote']}: "
                      f"{v['reason'] or '(no reason given)'}" for g, v in dissent]
            lines.append("")
    lines += ["## Chair", ""]
    attempts = doc.get("chair_attempts") or []
    for a in attempts:
        lines.append(f"- attempt {a['attempt']} · {a['role']} · {a['model']} · {a['status']}"
                     + (f" · verdict {a['verdict']}" if a.get("verdict") else "")
                     + (f" — {a['reason']}" if a.get("reason") else ""))
    if synthesis:
        lines += ["", synthesis.strip()]
    elif not attempts:
        lines.append("The chair was not called.")
    lines.append("")
    if doc.get("notices"):
        lines += ["## Notices", ""] + [f"- {n}" for n in doc["notices"]] + [""]
    u = doc["usage"]
    lines += ["## Cost", "",
              f"{len(doc['stages'])} stages · {doc['requests']} requests · "
              f"{u['input_tokens']:,} in + {u['output_tokens']:,} out tokens · "
              f"{_money(doc['cost_usd'], doc['cost_exact'])}", ""]
    return "\n".join(lines)


_STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;\
padding:0 1rem;color:#1d1d1f}table{border-collapse:collapse;margin:.5rem 0}\
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}\
th{background:#f3f3f3}blockquote{border-left:4px solid #999;margin:0;padding:.25rem 1rem;\
color:#444}pre,code{background:#f6f6f6;font-size:13px}pre{padding:.5rem;overflow:auto}"""


def report_html(markdown: str, title: str) -> str:
    from markdown_it import MarkdownIt  # rich's own dependency; html off: model text stays text

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n{body}</body></html>\n")
