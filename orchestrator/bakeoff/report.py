"""The bench report: the terminal tables, ``report.md`` and a self-contained ``report.html``.

Every number comes from :func:`orchestrator.bakeoff.stats.analyse` over the saved trials, so
``orch bench report FILE`` prints exactly what the run printed.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from orchestrator.bakeoff import charts
from orchestrator.bakeoff.contestants import graded

NO_CHARTS = ("Charts need the report extra: pip install 'orch[report]' (matplotlib), then "
             "`orch bench report FILE` again.")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _ci(ci: list[float | None], fmt=_pct) -> str:
    return "[—]" if ci[0] is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _dpct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f}"


def _num(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def _dnum(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:+,.{digits}f}"


def _dollars(x: float) -> str:
    """Cents-level amounts to 4 places; smaller ones to 3 significant digits, not $0.0000."""
    return f"{x:.4f}" if x == 0 or abs(x) >= 0.01 else f"{x:.3g}"


def _money(x: float | None) -> str:
    return "—" if x is None else f"${_dollars(x)}"


def _dmoney(x: float | None) -> str:
    return "—" if x is None else f"{'+' if x >= 0 else '-'}${_dollars(abs(x))}"


def tables(stats: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for each table the report prints."""
    k = stats["k"]
    main = [[r["contestant"], f"{_pct(r['pass']['value'])}"
             + (f" ({r['passed']}/{r['trials']})" if "passed" in r and r["trials"] else "")
             + f" {_ci(r['pass']['ci'])}",
             _pass_k(r), _num(r["tok_per_solved"]["value"]),
             _pct(r["cache_share"]["value"]), _num(r["steps"]["value"], 1),
             _num(r["secs"]["value"], 1), "*" if r["pareto"] else ""]
            for r in stats["rows"]]
    out = [("contestants", ["variant", "pass [95% CI]", f"pass^{k}", "tok/solved", "cache",
                            "steps", "secs", "pareto"], main)]
    if stats["comparisons"]:
        vs = [[c["contestant"], f"{_dpct(c['delta'])} {_ci(c['delta_ci'], _dpct)}",
               f"{c['wins']}/{c['losses']}/{c['ties']}", str(c.get("tasks", "—")),
               f"{c['p']:.3g} ({c['p_holm']:.3g})",
               _dnum(c["delta_tok_per_solved"]), c["verdict"]] for c in stats["comparisons"]]
        out.append((f"vs {stats['baseline']}", ["variant", "Δ pass [95% CI]", "W/L/T",
                                                 "paired tasks", "p (Holm)", "Δ tok/solved", "verdict"], vs))
    metrics = []
    for r in stats["rows"]:
        metrics.append([r["contestant"], *_with_delta(r["cost_per_trial"], _money, _dmoney),
                        *_with_delta(r["cost_per_solved"], _money, _dmoney),
                        *_with_delta(r["secs"], lambda v: _num(v, 1), lambda v: _dnum(v, 1))])
    out.append(("custom metrics", ["variant", "cost-usd/trial [95% CI]", "Δ",
                                   "cost-usd/solved [95% CI]", "Δ", "secs [95% CI]", "Δ"],
                metrics))
    return out


def _pass_k(row: dict[str, Any]) -> str:
    """pass^k, saying over how many tasks when some had fewer than k trials."""
    if row["pass_k"] is None:
        return "—"
    n = row.get("pass_k_tasks")
    return _pct(row["pass_k"]) if n is None or n == row.get("tasks") else \
        f"{_pct(row['pass_k'])} ({n} tasks)"


def _with_delta(entry: dict[str, Any], fmt, dfmt) -> list[str]:
    """[value [CI], Δ [CI]] of one metric; the baseline's Δ cell says so."""
    value = f"{fmt(entry['value'])} {_ci(entry['ci'], fmt)}"
    if "delta" not in entry:
        return [value, "baseline"]
    return [value, f"{dfmt(entry['delta'])} {_ci(entry['delta_ci'], dfmt)}"]


def notes(doc: dict[str, Any]) -> list[str]:
    stats = doc["stats"]
    out = []
    stop = doc.get("interrupted")
    if stop:
        out.append(f"{'Interrupted' if stop['signal'] else 'Stopped'} "
                   f"({stop['signal_name']}): partial results, "
                   f"{len(stop['complete'])} of {stop['planned']} trials graded; "
                   f"{len(stop['cut_short'])} cut short (excluded), "
                   f"{stop['not_started']} never started.")
    out += ensemble_lines(doc)
    graded = stats.get("graded_tasks", stats["tasks"])
    if stats["min_detectable"] is not None:
        tasks = f"{graded} tasks" if graded == stats["tasks"] else \
            f"{graded} of {stats['tasks']} tasks graded for every contestant"
        out.append(f"With {tasks}, only pass-rate differences above "
                   f"~{100 * stats['min_detectable']:.0f} points can be detected reliably "
                   "(80% power, 5% error).")
    from orchestrator.bakeoff.resume import notes as resume_notes

    out += resume_notes(doc)
    out += [f"Warning: {w}" for w in stats["warnings"]]
    excluded = doc.get("exclusions") or []
    if excluded:  # one line per task and reason, naming the contestants
        out.append(f"{len(excluded)} trial(s) excluded (not counted):")
        groups: dict[tuple[str, str], list[str]] = {}
        for e in excluded:
            groups.setdefault((e["task"], e["reason"]), []).append(
                f"{e['contestant']} #{e['trial']}")
        out += [f"  - {task}: {reason} ({', '.join(who)})"
                for (task, reason), who in groups.items()]
    return out


def ensemble_lines(doc: dict[str, Any]) -> list[str]:
    """"fanout(a,b,c)+chair vs best member (b): Δ …, interval, W/L/T, p (Holm), cost ratio:
    the verdict". A results file from before verdicts has no ``verdict``: its line ends at
    the ratio."""
    kinds = {c["name"]: c for c in (doc.get("settings") or {}).get("contestants") or []}
    out = []
    for e in doc["stats"].get("ensembles") or []:
        c = kinds.get(e["contestant"], {})
        label = f"{c['kind']}({','.join(c.get('models') or [])})" + graded(c) + _rounds(c) \
            if c.get("kind") in ("fanout", "council") else e["contestant"]
        ratio = "—" if e["cost_ratio"] is None else f"×{e['cost_ratio']:.2f}"
        tied = f"; tied with {', '.join(e['tied'])}" if e.get("tied") else ""
        holm = f" (Holm {e['p_holm']:.3g})" if "p_holm" in e else ""
        out.append(f"{label} vs best member ({e['best_member']}{tied}): Δ {_dpct(e['delta'])} "
                   f"{_ci(e['delta_ci'], _dpct)} points on {e['tasks']} tasks, W/L/T "
                   f"{e['wins']}/{e['losses']}/{e['ties']}, p {e['p']:.3g}{holm}, cost ratio "
                   f"{ratio}" + (f": {versus_words(e)}" if "verdict" in e else ""))
    return out


def versus_words(e: dict[str, Any]) -> str:
    """The verdict on an ensemble and its best member, in words a user can act on."""
    from orchestrator.bakeoff.verdicts import VERSUS_WORDS

    if e["verdict"] in VERSUS_WORDS:
        return VERSUS_WORDS[e["verdict"]]
    if e.get("needs_tasks") is None:
        return f"inconclusive (no difference seen on these {e['tasks']} tasks)"
    if e["needs_tasks"] <= e["tasks"]:  # the test and the interval disagree at this size
        return "inconclusive at this size (needs more tasks)"
    return f"inconclusive at this size (needs about {e['needs_tasks']} tasks)"


def _rounds(c: dict[str, Any]) -> str:
    """A deliberating fanout's rounds, as its label ends: `` ×3 rounds``."""
    n = c.get("rounds") or 1
    return f" ×{n} rounds" + (f", {c['peers']} peers" if c.get("peers") else "") if n > 1 \
        else ""


def settings_lines(doc: dict[str, Any]) -> list[str]:
    s = doc["settings"]
    lines = [f"bench {doc['bench_id']} · {s['source']} · {len(s['tasks'])} tasks × "
             f"{s['trials']} trials · timeout {s['timeout_s']:g} s · prompt sha256 "
             f"{s['prompt_sha256']}"
             + (f" · untrusted programs confined: {s['confinement']}"
                if s.get("confinement") else ""), "versions: " + ", ".join(
                 f"{k} {v}" for k, v in (doc.get("versions") or {}).items())]
    for c in s["contestants"]:
        what = c.get("model") if c["kind"] == "model" else c.get("command") \
            if c["kind"] == "command" else f"({', '.join(c.get('models') or [])})" \
            + (f" + chair {c['chair']}" if c.get("chair") else
               " (no chair: the majority vote)" if c.get("aggregate") == "vote" else
               " (no chair: any member)" if (c.get("rounds") or 1) == 1 else
               " (no chair: the deliberation's winner)") + _rounds(c)
        if c["kind"] == "council":
            what = f"seats ({', '.join(c.get('models') or [])}), chair {c.get('chair')}"
        model_id = (doc.get("model_ids") or {}).get(c["name"])
        lines.append(f"  {c['name']}: {c['kind']} {what}"
                     + (f" ({model_id})" if model_id and model_id != what else "")
                     + (f" — {c['note']}" if c.get("note") else ""))
    return lines


def _line(cells: list[str], widths: list[int]) -> str:
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


FAILURES_SHOWN = 20  # rows of the failure summary; the rest are counted
CHECK_LINES = 3  # last lines of a check's output in the failure summary


def failures(doc: dict[str, Any]) -> tuple[list[str], list[list[str]], int]:
    """(header, rows, not shown) of the failed trials: task, contestant, trial and the
    last lines of what the check said (or why the trial ended), as pytest's short
    summary does. `orch bench show RESULTS TASK CONTESTANT` prints the whole trial."""
    failed = [r for r in doc["trials"] if not r.get("excluded") and not r.get("passed")]
    rows = []
    for r in failed[:FAILURES_SHOWN]:
        said = (r.get("check_output") or "").strip() or (r.get("reason") or "").strip()
        tail = " ⏎ ".join(said.splitlines()[-CHECK_LINES:]) or "—"
        rows.append([r["task"], r["contestant"], f"#{r['trial']}",
                     tail if len(tail) <= 160 else "…" + tail[-159:]])
    return ["task", "contestant", "trial", "check (last lines)"], rows, \
        max(0, len(failed) - FAILURES_SHOWN)


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    return [f"{title}:", _line(header, widths), _line(["-" * w for w in widths], widths),
            *(_line(r, widths) for r in rows), ""]


def terminal(doc: dict[str, Any]) -> str:
    """Plain aligned tables for stdout, then the failed trials."""
    parts = []
    for title, header, rows in tables(doc["stats"]):
        parts += _table(title, header, rows)
    parts += notes(doc) + [""] + settings_lines(doc)
    header, rows, more = failures(doc)
    if rows:
        parts += ["", *_table(f"failed trials ({len(rows) + more})", header, rows)]
        if more:
            parts.append(f"… and {more} more (orch bench show RESULTS lists every trial)")
    return "\n".join(parts).rstrip("\n")


def markdown(doc: dict[str, Any]) -> str:
    parts = [f"# orch bench {doc['bench_id']}", ""]
    for title, header, rows in tables(doc["stats"]):
        parts += [f"## {title}", "", "| " + " | ".join(header) + " |",
                  "|" + " --- |" * len(header)]
        parts += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        parts.append("")
    parts += [f"- {n.strip()}" for n in notes(doc)] + ["", "## Settings", "", "```"]
    parts += settings_lines(doc) + ["```", ""]
    return "\n".join(parts)


def page(doc: dict[str, Any]) -> str:
    """One HTML file, no external resources: tables, notes and the three charts as SVG."""
    e = html.escape
    body = [f"<h1>orch bench {e(doc['bench_id'])}</h1>"]
    for title, header, rows in tables(doc["stats"]):
        body.append(f"<h2>{e(title)}</h2><table><tr>"
                    + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                              for r in rows) + "</table>")
    body.append("<ul>" + "".join(f"<li>{e(n.strip())}</li>" for n in notes(doc)) + "</ul>")
    svgs = charts.draw(doc["stats"])
    body.append("<h2>charts</h2>")
    if svgs is None:
        body.append(f"<p class=note>{html.escape(NO_CHARTS, quote=False)}</p>")
    else:
        body += [f"<figure>{svg}</figure>" for svg in svgs]
    body.append("<h2>settings</h2><pre>" + e("\n".join(settings_lines(doc))) + "</pre>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:"
             "collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
             "figure{margin:1em 0}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>orch bench "
            f"{e(doc['bench_id'])}</title><style>{style}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def write(doc: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """report.md and report.html in ``folder``, scrubbed of key values."""
    from orchestrator.store import write_text_atomic

    folder.mkdir(parents=True, exist_ok=True)
    md, page_path = folder / "report.md", folder / "report.html"
    text = markdown(doc)
    if charts.available() is False:
        text += f"\n{NO_CHARTS}\n"
    # through the scrubbing writer: a results file (or a reason in it) may hold model text
    write_text_atomic(md, text)
    write_text_atomic(page_path, page(doc))
    return md, page_path
