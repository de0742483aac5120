"""What ``orch council run`` and ``orch council stats`` print on stdout (without ``--json``)."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.council.tally import CONCURRENCE_LINE, SEVERITIES, TIERS


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def print_run(doc: dict[str, Any], tally: dict[str, Any] | None,
              synthesis: str | None) -> None:
    verdict = doc.get("verdict")
    head = f"verdict: {verdict} (chair {doc['chair']['model']})" if verdict else "no verdict"
    click.echo(f"Council {doc['run_id']}: {doc['status']} · {head}")
    if tally:
        click.echo(CONCURRENCE_LINE)
        click.echo("Tiers: " + " · ".join(f"{tally['tiers'][t]} {t}" for t in TIERS))
        for g in tally["groups"]:
            c = g["counts"]
            raised = ", ".join(f"{fid} {seat}" for fid, seat in zip(g["findings"], g["seats"],
                                                                   strict=True))
            where = f" {g['location']}" if g["location"] else ""
            click.echo(f"  [{g['tier']}] {g['severity']}{where} — {g['claim']} ({raised}; "
                       f"agree {c['agree']} · dispute {c['dispute']} · neutral {c['neutral']})")
            for m in (g.get("claims") or [])[1:]:  # a group shows every claim
                click.echo(f"      also {m['finding']}: {m['claim']}")
    click.echo("Seats:")
    for s in doc["seats"]:
        if s["status"] != "reviewed":
            click.echo(f"  {s['model']}: did not review — {lost_reason(s)}")
            continue
        cred = "no street-cred" if s["street_cred"] is None else \
            f"street-cred {s['street_cred']:.2f}"
        block = "conformed" if s["conformed"] else "non-conforming"
        cut = " · CUT" if s["cut"] else ""
        plural = "" if s["raised"] == 1 else "s"
        label = f" ({s['label']})" if s.get("label") else ""  # none before the bundle exists
        click.echo(f"  {s['model']}{label}: {s['raised']} finding{plural}, "
                   f"{s['confirmed']} confirmed · {cred} · {block}{cut}")
    if synthesis:
        click.echo("")
        click.echo(f"== chair: {doc['chair']['model']}")
        click.echo(synthesis.rstrip())


def say_run(doc: dict[str, Any]) -> None:
    """What the run says about itself, as ``orch:`` lines on stderr: its notices, its
    totals, where its report is (also with ``--json``)."""
    from orchestrator.notices import say

    for notice in doc.get("notices") or []:
        say(notice)
    u = doc["usage"]
    floor = "" if doc["cost_exact"] else " (a floor: some costs are unknown)"
    say(f"council {doc['run_id']}: {doc['status']} · {doc['requests']} requests · "
        f"{u['input_tokens']:,} in + {u['output_tokens']:,} out tokens · "
        f"{_money(doc['cost_usd'])}{floor} · report: {doc['dir']}/report.md, "
        f"{doc['dir']}/report.html (open it in a browser)")


def lost_reason(seat: dict[str, Any]) -> str:
    """Why a seat did not review; an interrupted run's seat may have no reason of its own."""
    return seat.get("reason") or "the run was interrupted before its review was read"


def print_stats(stats: list[dict[str, Any]]) -> None:
    if not stats:
        click.echo("no council runs yet; run one with `orch council run`")
        return
    rows = [("model", "runs", "seat", "chair", "reviewed", "findings b/M/m/n", "confirmed",
             "street-cred", "conformed", "verdicts")]
    for s in stats:
        rows.append((
            s["model"], str(s["runs"]), str(s["seat_runs"]), str(s["chair_runs"]),
            f"{s['reviewed']}/{s['seat_runs']}" if s["seat_runs"] else "—",
            "/".join(str(s["findings"][k]) for k in SEVERITIES),
            "—" if s["confirmed_rate"] is None else f"{s['confirmed']} ({s['confirmed_rate']:.0%})",
            _cred(s),
            "—" if s["conformed_rate"] is None else f"{s['conformed_rate']:.0%}",
            f"{s['verdicts']}/{s['chair_runs']}" if s["chair_runs"] else "—",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    click.echo("street-cred: 0..1 from peers' rankings, 1 = ranked first by every peer, over "
               "the runs it was ranked in (n); a 95% interval from 5 runs on. "
               "Confirmed counts peer concurrence, never verification.")


def _cred(s: dict[str, Any]) -> str:
    if s["street_cred"] is None:
        return "—"
    ci = s.get("street_cred_ci95")
    span = f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else ""
    return f"{s['street_cred']:.2f}{span} (n={s['ranked_runs']})"


def print_judges(doc: dict[str, Any]) -> None:
    """``orch council stats --judges``: one row per judge, then what the columns mean."""
    if not doc["judges"]:
        click.echo("no judges' votes yet; they are recorded by each `orch council run` "
                   "from this version on")
        return
    rows = [("judge", "runs", "votes", "α vs others [95% CI] (findings)",
             "position bias [95% CI]", "agrees with tier [95% CI] (n)")]
    for j in doc["judges"]:
        a, b, t = j["alpha"], j["position_bias"], j["tier_agreement"]
        rows.append((j["judge"], str(j["runs"]), f"{j['voted']}/{j['votes']}",
                     f"{_num(a['value'])} {_span(a['ci'], _num)} ({a['units']})",
                     f"{_signed(b['value'])} {_span(b['ci'], _signed)}",
                     f"{_pct(t['value'])} {_span(t['ci'], _pct)} ({t['n']})"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    p = doc["panel"]
    click.echo(f"panel: α {_num(p['alpha'])} {_span(p['ci'], _num)} over {p['units']} "
               f"findings, {doc['runs']} runs")
    click.echo("α: Krippendorff's alpha (nominal) with the majority of the other judges,\n"
               "   1 = always agree, 0 = chance.\n"
               "position bias: agree rate on findings shown in the first half of its view\n"
               "   less the second half, 0 = the order does not move it.\n"
               "agrees with tier: its vote is the side its group's tier took (its own vote\n"
               "   is part of it). Intervals treat each council run as one unit.")


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _span(ci: list[float | None], fmt) -> str:
    return "[—]" if ci[0] is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"
