"""``orch fanout --rounds N``'s face: progress per round on stderr, the outcome in a few lines:
the rounds and the stop rule said on stderr, the winner on stdout."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.deliberation.run import run_deliberation
from orchestrator.notices import say


def deliberate(spec, pm, cfg, ledger, *, rounds: int, peers: int | None,
               quiet: bool) -> dict[str, Any]:
    """Run the deliberation with the fanout's progress display; return its document."""
    from orchestrator.progress import make_progress

    progress = make_progress(quiet)

    def said(text: str) -> None:
        if not quiet:
            say(text)

    with progress:
        return run_deliberation(spec, pm, cfg, ledger, rounds=rounds, peers=peers,
                                observe=progress, say=said)


def outcome_lines(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What the run says about its rounds and stop rule (stderr), and its winner (stdout)."""
    about = []
    for r in doc.get("rounds") or []:
        cast = sum(1 for leg in r["legs"] if leg.get("vote"))
        counted = sum(1 for leg in r["legs"] if (leg.get("vote") or {}).get("answer_digest"))
        declined = sum(1 for leg in r["legs"] if leg.get("declined"))
        votes = f"{cast} vote{'' if cast == 1 else 's'}" if cast == counted \
            else f"{cast} votes cast, {counted} counted"
        votes += f" · {declined} declined" if declined else ""
        cost = "unknown" if not r["cost_exact"] and not r["cost_usd"] else f"${r['cost_usd']:.4f}"
        about.append(f"round {r['round']}: {len(r['legs'])} legs · {r['changed']} changed · "
                     f"{votes} · {r['requests']} requests · {cost}")
    stop = doc.get("stop")
    if stop:
        about.append(f"stopped: {stop['rule']} after round {stop['after_round']}"
                     + (f" (also: {', '.join(stop['also'])})" if stop.get("also") else ""))
    win = doc.get("winner")
    result = []
    if win:
        tie = f"; tie broken by {win['tie_break']}" if win.get("tie_break") else ""
        held = f"held by {win['holders']} of {len(doc.get('legs') or [])} legs"
        if win.get("by") == "holders":
            result.append(f"Winner: {', '.join(win['models'])} ({held}; no vote counted{tie})")
        else:
            support = win.get("support", win["holders"] + win["votes"])
            result.append(f"Winner by support: {', '.join(win['models'])} (support {support}: "
                          f"{held} + {win['votes']} vote{'' if win['votes'] == 1 else 's'} "
                          f"from other legs in round {win['votes_round']}{tie})")
    return about, result


def print_outcome(doc: dict[str, Any]) -> None:
    about, result = outcome_lines(doc)
    for line in result:
        click.echo(line)
    for line in about:
        say(line)
