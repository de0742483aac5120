"""``orch runs``: past waves and councils — list, show, follow a live one, clean up old ones."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click

from orchestrator import config as config_mod
from orchestrator.app.runs import STATUSES, _moment, _statuses, bench_dir, cache_dir, listed, shown
from orchestrator.cli.common import print_json
from orchestrator.cli.params import FiniteFloat
from orchestrator.cli.runs_search import search as search_command


def runs_dir_option(command):
    return click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
                        help="Where the runs are (default ORCH_HOME/runs).")(command)


@click.group(invoke_without_command=True)
@click.option("--since", help="Only runs started since: 30m, 24h, 7d, 2w or an ISO date.")
@click.option("--status", "status", multiple=True,
              help="Only runs with this status (repeat, or a,b): " + ", ".join(STATUSES))
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@runs_dir_option
@click.pass_context
def runs(ctx, since, status, as_json, runs_dir):
    """List waves and councils, newest first: id, kind, status, legs, cost, age and tag.

    \b
    Examples:
      orch runs --since 7d --status error,partial
      orch runs show 20261130-101500-ab12
      orch runs search rate limit              # by the text of prompts and answers
      orch runs tail 20261130-101500-ab12      # follow a live run; its exit code at the end
      orch runs gc --older-than 30d --dry-run  # the ledger keeps its rows
    """
    if ctx.invoked_subcommand is not None:
        return
    from orchestrator.operations import runs as runs_mod

    found = listed(runs_dir, since, status)
    if as_json:
        print_json({"runs": [e.to_dict() for e in found]})
        return
    if not found:
        click.echo("no runs" + (" match" if _statuses(status) or since else " yet (orch fanout starts one)"))
        return
    head = ("ID", "KIND", "STATUS", "LEGS", "COST", "AGE", "TAG")
    cells = [(e.id, e.kind, e.status, str(e.legs),
              "?" if e.cost_usd is None else f"${e.cost_usd:.4f}", runs_mod.age(e.created),
              e.tag or "-") for e in found]
    widths = [max(len(r[i]) for r in [head, *cells]) for i in range(len(head))]
    click.echo("  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip())
    for entry, row in zip(found, cells, strict=True):
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for wave in entry.waves or []:  # a bench's trial waves, folded under it
            click.echo(f"  └ {wave['id']}  {wave['status']}  {wave['legs']} legs")
        if entry.parent:  # a follow-up (orch fanout --continue)
            click.echo(f"  └ continues {entry.parent}")


@runs.command()
@click.argument("run_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the run's document as JSON.")
@runs_dir_option
def show(run_id, as_json, runs_dir):
    """Show one run (what `orch status` shows, for waves and councils alike): by its id or
    a unique prefix of it."""
    show_run(run_id, as_json, runs_dir)


def show_run(run_id: str | None, as_json: bool, runs_dir: Path | None) -> None:
    """`orch runs show ID` and `orch status [ID]`: one run, found the same way (exact id, or
    a unique prefix; no id: the latest run)."""
    entry, doc = shown(runs_dir, run_id)
    if as_json:
        print_json(doc)
    elif entry.kind in ("wave", "deliberation"):
        echo_wave(doc)
    else:
        _echo_run(entry, doc)


def _money(cost) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def echo_wave(doc: dict) -> None:
    """A wave's (or a deliberation's) status, cost and one line per leg (``orch status`` and
    ``orch runs show``); a deliberation's rounds decided so far before its legs."""
    live = doc.get("alive") and doc.get("status") == "running"
    rebuilt = "" if not doc.get("rebuilt") else " (live: read from its legs' files and " \
        "the ledger)" if live else " (rebuilt from the legs' files)"
    kind = "Deliberation" if doc.get("kind") == "deliberation" else "Wave"
    click.echo(f"{kind} {doc['wave_id']}: {doc['status']}, {_money(doc.get('cost_usd'))}"
               f"{' so far' if live else ''}{rebuilt}")
    _in_flight(doc)
    if doc.get("parent_wave_id"):
        click.echo(f"  continues wave {doc['parent_wave_id']}")
    if doc.get("continued_by"):
        click.echo(f"  continued by: {', '.join(doc['continued_by'])}")
    if doc.get("kind") == "deliberation":
        rounds = [r for r in doc.get("rounds") or [] if isinstance(r, dict)]
        most = (doc.get("options") or {}).get("rounds")
        click.echo(f"  rounds decided: {len(rounds)}" + (f" of up to {most}" if most else ""))
        for r in rounds:
            click.echo(f"  round {r.get('round')}  {len(r.get('legs') or [])} legs  "
                       f"{r.get('changed', 0)} changed  {_money(r.get('cost_usd'))}")
    for leg in [*doc["legs"], *([doc["chair"]] if doc.get("chair") else [])]:
        reason = f" — {leg['reason']}" if leg.get("reason") else ""
        click.echo(f"  {leg['leg_id']}  {leg['model']}  {leg['status']}  "
                   f"{_money(leg['cost_usd'])}{reason}")


def _in_flight(doc: dict) -> None:
    """Requests sent before a kill that no row records: they may have been billed."""
    from orchestrator.account.journal import words

    said = words(doc.get("in_flight_at_kill") or {})
    if said:
        click.echo(f"  {said}")


def _echo_run(entry, doc: dict) -> None:
    cost = doc.get("cost_usd", entry.cost_usd)
    status = doc.get("status", entry.status)
    code = doc.get("exit_code", entry.exit_code)
    said = f"{'?' if cost is None else f'${cost:.4f}'}"
    click.echo(f"{entry.kind.capitalize()} {entry.id}: {status} "
               + (f"({said} so far)" if status == "running" else f"(exit {code}, {said})"))
    for stage in doc.get("stages") or []:
        if isinstance(stage, dict):
            click.echo(f"  stage {stage.get('name')}  {stage.get('status')}  "
                       f"{len(stage.get('legs') or [])} legs  {_money(stage.get('cost_usd'))}")
    if doc.get("trials") is not None:
        click.echo(f"  trials: {len(doc['trials'])} (orch bench report {entry.dirs[0]}; "
                   f"orch bench show {entry.dirs[0]})")
    if doc.get("error"):
        click.echo(f"  {doc['error']}")
    _in_flight(doc)
    if entry.kind == "bench" and doc.get("status") == "interrupted" and entry.dirs[0].is_file():
        click.echo(f"  orch bench resume {entry.dirs[0]} runs the trials it did not grade "
                   "(one billed before the kill is graded from the record, not bought again)")
    for wave in entry.waves or []:
        click.echo(f"  wave {wave['id']}  {wave['status']}  {wave['legs']} legs")
    for seat in doc.get("seats") or []:
        reason = f" — {seat['reason']}" if seat.get("reason") else ""
        paid = f"  {_money(seat['cost_usd'])}" if "cost_usd" in seat else ""
        click.echo(f"  seat {seat.get('label') or '-'}  {seat.get('model')}  "
                   f"{seat.get('status')}{paid}{reason}")
    verdict = doc.get("verdict")
    if verdict:
        click.echo(f"  verdict: {str(verdict).splitlines()[0][:200]}")
    click.echo(f"  files: {entry.dirs[0]}")


@runs.command()
@click.argument("run_id", metavar="ID")
@click.option("--interval", type=FiniteFloat(0.05, max=60), default=0.5, show_default=True,
              help="Seconds between reads of the run's files.")
@runs_dir_option
def tail(run_id, interval, runs_dir):
    """Follow a live run from its files until it ends, then exit with the run's own exit
    code. A rich table on a terminal, one line per change otherwise."""
    from orchestrator.operations import runs as runs_mod

    base = runs_dir or config_mod.runs_dir()
    entry = runs_mod.find(base, run_id, bench_dir(), cache_dir())
    if entry.kind in ("wave", "deliberation"):
        code = _follow_wave(base, entry.id, interval)
    else:
        code = _follow_run(base, entry, interval)
    sys.exit(code if isinstance(code, int) else 1)


def _follow_wave(base: Path, wave_id: str, interval: float) -> int:
    from orchestrator.engine.rebuild import load_wave
    from orchestrator.engine.record import LegRecord
    from orchestrator.progress import LiveProgress, PlainProgress

    progress = LiveProgress() if sys.stdout.isatty() else PlainProgress(stream=sys.stdout)
    with progress:
        while True:  # a running wave's legs as their files and the ledger say, each time
            doc = load_wave(base, wave_id)
            finished = doc["status"] != "running"
            legs = [*doc["legs"], *([doc["chair"]] if doc.get("chair") else [])]
            for leg in legs:
                progress(SimpleNamespace(record=LegRecord.from_dict(leg)))
            if finished:
                break
            time.sleep(interval)
    kind = "deliberation" if doc.get("kind") == "deliberation" else "wave"
    click.echo(f"{kind} {wave_id}: {doc['status']} (exit {doc['exit_code']})")
    return doc["exit_code"]


def _follow_run(base: Path, entry, interval: float) -> int:
    from orchestrator.operations import runs as runs_mod

    said = None
    while True:
        doc = runs_mod.document(base, entry)
        stages = doc.get("stages") or {}
        status = doc.get("status", entry.status)
        line = f"{entry.kind} {entry.id}: {status}" + (
            f" ({', '.join(f'{k} {v}' for k, v in stages.items())})"
            if isinstance(stages, dict) and stages else "")
        if line != said:
            click.echo(line)
            said = line
        if status not in ("running", "pending", None):
            return doc.get("exit_code", entry.exit_code)
        time.sleep(interval)


@runs.command()
@click.option("--older-than", required=True, help="Remove runs started before this: 30d, 2w...")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was (or would be) removed.")
@runs_dir_option
def gc(older_than, dry_run, as_json, runs_dir):
    """Remove the folders of finished runs older than --older-than. The ledger keeps every
    row, so `orch spend` still counts them; running runs are never touched."""
    from orchestrator.operations import runs as runs_mod

    cutoff = _moment("--older-than", older_than)
    old = runs_mod.collect(runs_dir or config_mod.runs_dir(), cutoff, bench_dir(), cache_dir())
    freed = 0 if dry_run else sum(runs_mod.remove(e) for e in old)
    if as_json:
        print_json({"dry_run": dry_run, "removed": [e.id for e in old], "bytes_freed": freed})
        return
    verb = "would remove" if dry_run else "removed"
    for entry in old:
        folded = f", {len(entry.waves)} trial wave(s)" if entry.waves else ""
        click.echo(f"{verb} {entry.kind} {entry.id} ({runs_mod.age(entry.created)} old"
                   f"{folded})")
    amount = f"{freed / 1e6:.1f} MB" if freed >= 1e5 else f"{freed / 1e3:.1f} kB"
    tail_note = "" if dry_run else f", {amount} freed"
    click.echo(f"{verb} {len(old)} run(s){tail_note}; the ledger keeps their rows")


runs.add_command(search_command)
