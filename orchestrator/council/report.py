"""``report.md`` from the run document and the tally (``report.html`` is report_html.py)."""

from __future__ import annotations

from typing import Any

from orchestrator.council.tally import CONCURRENCE_LINE, SEVERITIES, TIERS, dissent


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
        cred = "—" if s.get("street_cred") is None else f"{s['street_cred']:.2f}"
        lines.append(f"| {_cell(s['model'])} | {_cell(s.get('label') or '—')} | {review} | "
                     f"{counts} | {s.get('confirmed', 0)} | {cred} | {block} |")
    lines += ["", "Street-cred: 0..1 from the peers' rankings, 1 = ranked first by every peer.",
              ""]
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
                claims = " / ".join(f"{m['finding']}: {m['claim']}" for m in g["claims"]) \
                    if len(g.get("claims") or []) > 1 else g["claim"]
                lines.append(f"| {', '.join(g['findings'])} | {g['severity']} | "
                             f"{_cell(g['location']) or '—'} | {_cell(claims)} | "
                             f"{_cell(', '.join(g['seats']))} | {c['agree']} | {c['dispute']} | "
                             f"{c['neutral']} |")
            lines.append("")
        said = dissent(tally)
        if said:
            lines += ["### Dissent", ""]
            lines += [f"- {d['finding']} ({d['tier']}) — {d['judge']} votes {d['vote']}: "
                      f"{d['reason'] or '(no reason given)'}" for d in said]
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
