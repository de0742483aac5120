"""``orch spend``: what the ledger says was spent, grouped, with unknown costs called out."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from orchestrator.account.journal import words as journal_words
from orchestrator.app.spend import _count, _missing_sqlite_file, _since, in_flight, spend_json
from orchestrator.ledger.spend import GROUP_BY, Ledger

IN_FLIGHT_TAIL = " (not in the ledger: a killed orch sent them; `orch status` names its run)"
TOKEN_COLUMNS = (("input_tokens", "input"), ("output_tokens", "output"),
                 ("reasoning_tokens", "reasoning"), ("cached_tokens", "cached"))


@click.command()
@click.option("--since", "since_text", default="7d", show_default=True, metavar="WHEN",
              help="Only legs since then: 30m, 24h, 7d, 2w, an ISO date/datetime (UTC), or 'all'.")
@click.option("--group-by", type=click.Choice(GROUP_BY), help="One table row per group.")
@click.option("--json", "as_json", is_flag=True, help="Print the rollup as JSON on stdout.")
def spend(since_text: str, group_by: str | None, as_json: bool) -> None:
    """Roll up the spend ledger: tokens and dollars by model, day, wave, tag, status, kind,
    user, host (user: ORCH_USER, else the OS user, as recorded with each row) or round (a
    deliberation's, orch fanout --rounds).

    Totals add up known costs only: when some legs have unknown cost the total is a floor,
    and orch says how many. The ledger is ORCH_LEDGER_URL, else ORCH_HOME/ledger.db.
    """
    if as_json:
        click.echo(json.dumps(spend_json(since_text, group_by), indent=2))
        return
    since = _since(since_text)
    when = f"since {_moment(since)} ({since_text.strip()})" if since else "yet"
    missing = _missing_sqlite_file()
    flying = journal_words(in_flight(since))
    if missing is not None:  # reading must not create a database (or its directories)
        click.echo(f"no spend recorded {when} in {missing} (no ledger there yet)")
        if flying:
            click.echo(flying + IN_FLIGHT_TAIL)
        return
    ledger = Ledger()
    if ledger.replayed:  # rows an earlier command could not write in time (the outbox)
        click.echo(f"replayed {_count(ledger.replayed, 'row')} from the ledger outbox")
    data = ledger.rollup(since=since, group_by=group_by)
    if not data["legs"]:
        click.echo(f"no spend recorded {when} in {ledger.location}")
        if flying:
            click.echo(flying + IN_FLIGHT_TAIL)
        return
    if group_by:
        _print_table(group_by, data["groups"])
        click.echo()
        failed_legs = sum(g["failed_legs"] for g in data["groups"])
    else:
        failed_legs = sum(g["failed_legs"] for g in ledger.rollup(since, "status")["groups"])
    click.echo(f"{_count(data['legs'], 'leg')}, {_money(data['total_cost_usd'])} total"
               + (f" since {_moment(since)}" if since else ""))
    if data["unknown_cost_legs"]:
        click.echo(f"total is a floor: {_count(data['unknown_cost_legs'], 'leg')} "
                   f"{'has' if data['unknown_cost_legs'] == 1 else 'have'} unknown cost")
    if data["bounded_legs"]:  # answers whose cost could not be read: counted at their claim
        click.echo(f"total is at most {_money(data['bound_cost_usd'])}: "
                   f"{_count(data['bounded_legs'], 'leg')} had answers whose cost could not be "
                   "read from their usage (each counted at the most it could cost)")
    if flying:
        click.echo(flying + IN_FLIGHT_TAIL)
    if data["suspect_legs"]:  # usage the provider reported was impossible and was clamped
        click.echo(f"suspect usage: {_count(data['suspect_legs'], 'leg')}, "
                   f"{_money(data['suspect_cost_usd'])} of the total, from clamped token counts "
                   "(cost_source 'suspect'; see each leg's notes)")
    if data["failed_cost_usd"] or failed_legs:
        click.echo(f"{_money(data['failed_cost_usd'])} went to failed legs "
                   f"({_count(failed_legs, 'leg')} did not complete)")


def _print_table(group_by: str, groups: list[dict[str, Any]]) -> None:
    from rich import box
    from rich.table import Table

    from orchestrator.security.outlet import console as outlet_console

    tokens = [(k, label) for k, label in TOKEN_COLUMNS
              if k in ("input_tokens", "output_tokens") or any(g[k] for g in groups)]
    show_unknown = any(g["unknown_cost_legs"] for g in groups)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(group_by, overflow="fold")
    table.add_column("legs", justify="right")
    table.add_column("failed", justify="right")
    for _, label in tokens:
        table.add_column(label, justify="right")
    table.add_column("cost", justify="right")
    if show_unknown:
        table.add_column("unknown cost", justify="right")
    for g in groups:
        cells = [_key(g["key"]), f"{g['legs']:,}", f"{g['failed_legs']:,}",
                 *(f"{g[k]:,}" for k, _ in tokens), _money(g["cost_usd"])]
        if show_unknown:
            cells.append(f"{g['unknown_cost_legs']:,}" if g["unknown_cost_legs"] else "")
        table.add_row(*cells)
    console = outlet_console(highlight=False)
    needed = console.measure(table, options=console.options.update_width(10_000)).maximum
    if needed > console.width:  # a wrapped line beats a model name folded into fragments
        console = outlet_console(highlight=False, width=needed)
    console.print(table)


def _key(key: Any) -> str:
    return "(none)" if key is None or key == "" else str(key)


def _money(value: float) -> str:
    if 0 < value < 0.00005:
        return "<$0.0001"
    return f"${value:,.4f}"  # one precision: a column of costs lines up, cents of a cent show


def _moment(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")
