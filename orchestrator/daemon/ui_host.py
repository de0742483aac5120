"""``orch ui`` inside the daemon: the web view served from the daemon's process (so it lives as
long as the daemon and needs no process of its own), asked for over the daemon's socket, whose
peer is checked to be this user before a word is said (docs/security.md). The view is the one
``orch ui`` serves on its own: loopback, token, Host check, read-only; only the URL with its
token goes back over the socket. A view per runs folder, kept until the daemon stops."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError


class UIHost:
    """The web views this daemon serves, one per runs folder."""

    def __init__(self, touch) -> None:
        self.touch = touch  # a page served keeps the daemon from its idle stop
        self.servers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def serve(self, runs_dir: str, port: int) -> dict[str, Any]:
        """The URL of the view of ``runs_dir`` (started if none runs, or if ``port`` asks for
        another port than the running one's)."""
        from orchestrator import config as config_mod
        from orchestrator.ui.server import UIServer
        from orchestrator.ui.views import View

        folder = Path(runs_dir)
        if not folder.is_absolute():
            return {"error": f"the runs folder {runs_dir!r} is not an absolute path"}
        with self._lock:
            server = self.servers.get(runs_dir)
            if server is not None and port in (0, server.port):
                return {"url": server.url, "port": server.port, "started": False}
            home = config_mod.home()
            view = View(folder, home / "bench", home / "cache", on_request=self.touch)
            try:
                server = UIServer(view, port=port)
            except OSError as exc:
                raise OrchError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
                                "pass another --port, or none for a free one") from None
            server.start()
            threading.Thread(target=view.warm, name="orch-ui-warm", daemon=True).start()
            if runs_dir not in self.servers:
                self.servers[runs_dir] = server
            return {"url": server.url, "port": server.port, "started": True}

    def close(self) -> None:
        with self._lock:
            servers, self.servers = list(self.servers.values()), {}
        for server in servers:
            server.shutdown()
            server.server_close()
