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
@click.option("--no-daemon", is_flag=True,
              help="Serve from this process even when `orch serve` is up.")
def ui(port: int, no_open: bool, runs_dir: Path | None, no_daemon: bool) -> None:
    """A local web view of runs, waves, councils, benches and spend, on 127.0.0.1 only,
    behind a random token in the one URL it prints; its ask page starts a fanout, a council
    or a bench.

    It shows the records orch already writes (the runs folder, bench results, the spend
    ledger). The ask page runs what `orch fanout`, `orch council run` and `orch bench` would,
    with their checks and budgets, and shows each leg live, then offers a follow-up; context
    files come from the git work tree it starts in. When `orch serve`'s daemon runs, the
    view is served from the daemon's process (it lives as long as the daemon) and this
    command prints its URL and returns; otherwise it serves until Ctrl-C.
    """
    folder = (runs_dir or config_mod.runs_dir()).absolute()
    if not no_daemon and _in_daemon(folder, port, no_open):
        return
    from orchestrator.security.workspace_root import choose
    from orchestrator.ui.server import UIServer
    from orchestrator.ui.views import View

    root, _ = choose(None)  # the git work tree it starts in: context files come from there
    view = View(folder, config_mod.home() / "bench", config_mod.home() / "cache",
                workspace=root)
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


def _in_daemon(runs_dir: Path, port: int, no_open: bool) -> bool:
    """Served by a running daemon: its URL printed (and opened); False: none could."""
    from orchestrator.daemon.client import ask_ui

    reply = ask_ui(runs_dir, port)
    if reply is None:
        return False
    if reply.get("error"):
        raise OrchError(str(reply["error"]))
    click.echo(reply["url"])
    click.echo(f"orch ui: served by the orch serve daemon (pid {reply.get('pid')}) until it "
               "stops (`orch serve stop`); --no-daemon serves it from this process", err=True)
    if not no_open:
        import webbrowser

        webbrowser.open(reply["url"])
    return True
