"""``orch fanout --rounds N``'s face: progress per round on stderr, the outcome in a few lines."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.deliberation.run import run_deliberation


def deliberate(spec, pm, cfg, ledger, *, rounds: int, peers: int | None,
               quiet: bool) -> dict[str, Any]:
    """Run the deliberation with the fanout's progress display; return its document."""
    from orchestrator.progress import make_progress

    progress = make_progress(quiet)

    def say(text: str) -> None:
        if not quiet:
            click.echo(f"orch: {text}", err=True)

    with progress:
        return run_deliberation(spec, pm, cfg, ledger, rounds=rounds, peers=peers,
                                observe=progress, say=say)


def outcome_lines(doc: dict[str, Any]) -> list[str]:
    """The rounds, the stop rule and the winner, as the human output ends."""
    lines = []
    for r in doc.get("rounds") or []:
        cast = sum(1 for leg in r["legs"] if leg.get("vote"))
        counted = sum(1 for leg in r["legs"] if (leg.get("vote") or {}).get("answer_digest"))
        votes = f"{cast} votes" if cast == counted else f"{cast} votes cast, {counted} counted"
        cost = "unknown" if not r["cost_exact"] and not r["cost_usd"] else f"${r['cost_usd']:.4f}"
        lines.append(f"Round {r['round']}: {len(r['legs'])} legs · {r['changed']} changed · "
                     f"{votes} · {r['requests']} requests · {cost}")
    stop = doc.get("stop")
    if stop:
        lines.append(f"Stopped: {stop['rule']} after round {stop['after_round']}"
                     + (f" (also: {', '.join(stop['also'])})" if stop.get("also") else ""))
    win = doc.get("winner")
    if win:
        tie = f"; tie broken by {win['tie_break']}" if win.get("tie_break") else ""
        held = f"held by {win['holders']} of {len(doc.get('legs') or [])} legs"
        if win.get("by") == "holders":
            lines.append(f"Winner: {', '.join(win['models'])} ({held}; no vote counted{tie})")
        else:
            lines.append(f"Winner by votes: {', '.join(win['models'])} ({win['votes']} "
                         f"vote(s) in round {win['votes_round']}; {held}{tie})")
    return lines


def print_outcome(doc: dict[str, Any]) -> None:
    for line in outcome_lines(doc):
        click.echo(line)
