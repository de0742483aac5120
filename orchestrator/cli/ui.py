"""``orch ui``: serve the local read-only web view (orchestrator/ui) until interrupted."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator import config as config_mod
from orchestrator.errors import OrchError


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default="a free one",
              help="The loopback port to listen on.")
@click.option("--no-open", is_flag=True, help="Print the URL; do not open a browser.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the runs are (default ORCH_HOME/runs).")
def ui(port: int, no_open: bool, runs_dir: Path | None) -> None:
    """A local web view of runs, waves, councils, benches and spend: read-only, on
    127.0.0.1 only, behind a random token in the one URL it prints.

    It shows the records orch already writes (the runs folder, bench results, the spend
    ledger) and can start nothing and spend nothing. Ctrl-C stops it.
    """
    from orchestrator.ui.server import UIServer
    from orchestrator.ui.views import View

    view = View(runs_dir or config_mod.runs_dir(), config_mod.home() / "bench",
                config_mod.home() / "cache")
    try:
        server = UIServer(view, port=port)
    except OSError as exc:
        raise OrchError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); pass "
                        "another --port, or none for a free one") from None
    import threading

    threading.Thread(target=view.warm, name="orch-ui-warm", daemon=True).start()
    click.echo(server.url)
    if not no_open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
