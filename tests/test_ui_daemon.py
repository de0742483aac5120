"""``orch ui`` with ``orch serve``'s daemon up: a real daemon process serves the web view in
its own process (the ``orch ui`` command prints the URL and returns), with the same guard as
on its own (loopback, token, Host, GET only), sees a wave the daemon runs, and stops with it.
Without a daemon, or with ``--no-daemon``, ``orch ui`` serves from its own process as before."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_serve import daemon_process, sock, wait_for, xdg  # noqa: F401 - fixtures
from test_ui import get
from ui_browser import OrchUI

from orchestrator.testing.daemon import client
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = str(Path(sys.executable).with_name("orch"))
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")


def listening(port: int) -> bool:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            assert local.split(":")[0] == "0100007F"  # 127.0.0.1 only
            return True
    return False


def orch_ui(*args: str) -> tuple[SimpleNamespace, subprocess.CompletedProcess]:
    done = subprocess.run([ORCH, "ui", "--no-open", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    m = URL.fullmatch(done.stdout.strip())
    assert m, done.stdout
    return SimpleNamespace(port=int(m[1]), token=m[2], url=m[0]), done


def test_orch_ui_is_served_by_the_daemon_with_every_guard(orch, scripted_server, xdg,  # noqa: F811
                                                          daemon_process):  # noqa: F811
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here")
    orch.provider()
    scripted_server.script("m", Reply(text="answered in the daemon"))
    daemon = daemon_process()
    ui, done = orch_ui()  # the command returned: the daemon serves the page
    assert f"served by the orch serve daemon (pid {daemon.pid})" in done.stderr
    assert listening(ui.port)
    good = f"orch_ui_{ui.port}={ui.token}"
    # a wave the daemon runs shows on the page
    via = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
    assert via.exit_code == 0, via.output
    wave = json.loads(via.stdout)
    assert wave["pid"] == daemon.pid
    body = get(ui, "/", cookie=good).body.decode()
    assert f'href="/wave/{wave["wave_id"]}"' in body
    page = get(ui, f"/wave/{wave['wave_id']}", cookie=good)
    assert page.status == 200 and b"answered in the daemon" in page.body
    # the same guard as on its own
    assert get(ui, "/").status == 403
    assert get(ui, "/", cookie=f"orch_ui_{ui.port}=wrong").status == 403
    assert get(ui, "/", cookie=good, host="evil.example").status == 403
    assert get(ui, "/", cookie=good, host=f"localhost:{ui.port}").status == 200
    assert get(ui, "/", cookie=good, method="POST").status == 405
    resp = get(ui, f"/?token={ui.token}")
    assert resp.status == 303 and "HttpOnly" in resp.getheader("Set-Cookie")
    assert not [h for h, _ in resp.getheaders() if h.lower().startswith("access-control")]
    # asked again: the same view, not a second server
    again, _ = orch_ui()
    assert (again.port, again.token) == (ui.port, ui.token)
    # another runs folder: its own view, its own token
    other, _ = orch_ui("--runs-dir", str(orch.home / "elsewhere"))
    assert other.port != ui.port and other.token != ui.token and listening(other.port)
    # a port taken: one line, exit 1
    taken = subprocess.run([ORCH, "ui", "--no-open", "--port", str(other.port),
                            "--runs-dir", str(orch.home / "third")],
                           capture_output=True, text=True, timeout=60)
    assert taken.returncode == 1 and len(taken.stderr.strip().splitlines()) == 1
    assert f"cannot listen on 127.0.0.1:{other.port}" in taken.stderr
    # it stops with the daemon
    assert client(["serve", "stop"]).exit_code == 0
    daemon.communicate(timeout=60)
    wait_for(lambda: not listening(ui.port) and not listening(other.port),
             what="the web views to close with the daemon")


def test_no_daemon_serves_from_its_own_process(orch, xdg, daemon_process):  # noqa: F811
    daemon = daemon_process()
    server = OrchUI("--no-daemon")
    try:
        assert server.proc.poll() is None  # still serving: its own process
        assert get(server, "/", cookie=f"orch_ui_{server.port}={server.token}").status == 200
    finally:
        server.stop()
    assert daemon.poll() is None
    assert client(["serve", "stop"]).exit_code == 0
    assert not sock(xdg).exists()
    alone = OrchUI()  # no daemon: on its own, as before
    try:
        assert alone.proc.poll() is None
        assert get(alone, "/", cookie=f"orch_ui_{alone.port}={alone.token}").status == 200
    finally:
        alone.stop()
