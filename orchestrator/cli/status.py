"""``orch status WAVE_ID``: a wave's legs, from wave.json or rebuilt from the legs on disk."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator import config as config_mod
from orchestrator.cli.common import print_json


@click.command()
@click.argument("wave_id")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the wave's directories are (default ORCH_HOME/runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the wave document as JSON.")
def status(wave_id, runs_dir, as_json):
    """Show a wave: its status and each leg's. If the process that ran it was killed, the
    wave is rebuilt from each leg's metadata.json (legs left running show as aborted).

    Example: orch status 20261130-101500-ab12 --json
    """
    from orchestrator.engine.rebuild import load_wave

    doc = load_wave(runs_dir or config_mod.runs_dir(), wave_id)
    if as_json:
        print_json(doc)
        return
    echo_wave(doc)


def echo_wave(doc: dict) -> None:
    """A wave's status and one line per leg (``orch status`` and ``orch runs show``)."""
    rebuilt = " (rebuilt from the legs' files)" if doc.get("rebuilt") else ""
    click.echo(f"Wave {doc['wave_id']}: {doc['status']}{rebuilt}")
    for leg in [*doc["legs"], *([doc["chair"]] if doc.get("chair") else [])]:
        reason = f" — {leg['reason']}" if leg.get("reason") else ""
        cost = "unknown" if leg["cost_usd"] is None else f"${leg['cost_usd']:.4f}"
        click.echo(f"  {leg['leg_id']}  {leg['model']}  {leg['status']}  {cost}{reason}")
