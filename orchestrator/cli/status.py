"""``orch status [ID]``: a run (the latest with no id), shown as ``orch runs show`` shows it."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("run_id", metavar="[ID]", required=False)
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the wave's directories are (default ORCH_HOME/runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the wave document as JSON.")
def status(run_id, runs_dir, as_json):
    """Show a run — a wave, a council or a bench — by its id or a unique prefix of it; with
    no id, the latest run. A wave whose process was killed is rebuilt from each leg's
    metadata.json (legs left running show as aborted).

    \b
    Examples:
      orch status
      orch status 20261130-101500-ab12 --json
    """
    from orchestrator.cli.runs import show_run

    show_run(run_id, as_json, runs_dir)
