"""The daemon's environment is an allow-list (issue 38, item 5): after ``orch serve start``,
after the auto-start of ``daemon: auto`` and after ``orch serve start --foreground`` run by
hand, ``/proc/PID/environ`` of the real daemon holds no key: not ``OPENAI_API_KEY``, not a
declared provider's ``--api-key-env`` variable whose name looks like nothing secret, not a
``DATABASE_URL`` with its password, and the ledger URL without its password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.daemon import client, serve_processes
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
KEYS = {
    "OPENAI_API_KEY": "sk-proj-EnvLeak0123456789abcdefABCDEF",
    "ACME_CRED": "acme-cred-Zq8wX2vB9nM4kL7p",  # a declared provider's --api-key-env
    "DATABASE_URL": "postgresql://app:DbPw7x9Qm2Lr4v@db.internal/app",
}
LEDGER_PASSWORD = "LedgerPw5k2Rt8"
SECRET_VALUES = [*KEYS.values(), "DbPw7x9Qm2Lr4v", LEDGER_PASSWORD]


@pytest.fixture
def env(tmp_path, orch):
    """A shell holding keys: the scripted provider declared with ``api_key_env=ACME_CRED``."""
    orch.provider(api_key_env="ACME_CRED")
    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    full = {k: v for k, v in os.environ.items() if k != "ORCH_DAEMON"}
    full.update(KEYS, XDG_RUNTIME_DIR=str(run), ORCH_HOME=str(orch.home))
    yield full
    for pid in serve_processes(tmp_path):  # a failed test leaves nothing running
        os.kill(pid, signal.SIGTERM)


def _daemon_pid(env: dict, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client(["serve", "status", "--json"], env=env)
        if status.exit_code == 0:
            import json

            return json.loads(status.stdout)["pid"]
        time.sleep(0.1)
    raise AssertionError("the daemon never answered")


def _with_ledger(env: dict) -> dict:
    """A team ledger's URL with its password (nothing listens there: no job runs)."""
    return {**env, "ORCH_LEDGER_URL": f"postgresql+psycopg://orch:{LEDGER_PASSWORD}"
                                      "@127.0.0.1:9/orch"}


def _assert_no_key(pid: int, ledger: bool = True) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    environ = dict(v.partition("=")[::2] for v in raw.decode().split("\0") if v)
    for name in KEYS:
        assert name not in environ, name
    for value in SECRET_VALUES:
        assert value not in raw.decode(), value
    assert environ["ORCH_HOME"] and environ["XDG_RUNTIME_DIR"]  # what it needs, it has
    if ledger:  # the user kept, the password not
        assert environ["ORCH_LEDGER_URL"] == "postgresql+psycopg://orch@127.0.0.1:9/orch"
    return environ


def test_orch_serve_start_starts_a_daemon_holding_no_key(env):
    env = _with_ledger(env)
    started = client(["serve", "start"], env=env)
    assert started.exit_code == 0, started.stderr
    _assert_no_key(_daemon_pid(env))
    assert client(["serve", "stop"], env=env).exit_code == 0


def test_the_auto_started_daemon_holds_no_key(env, scripted_server):
    scripted_server.script("m", Reply(text="ok"))
    first = client(["fanout", "-m", "scripted/m", "-p", "x"], env=env)
    assert first.exit_code == 0, first.stderr
    assert "started a warm daemon" in first.stderr
    _assert_no_key(_daemon_pid(env), ledger=False)


def test_a_foreground_daemon_started_by_hand_starts_again_clean(env, tmp_path):
    """``orch serve start --foreground`` from a shell holding keys (systemd, a container):
    the same pid runs again (execve) with the allowed environment, before any warm-up."""
    env = _with_ledger(env)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "serve", "start",
                             "--foreground"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    environ = Path(f"/proc/{proc.pid}/environ")
    try:
        deadline = time.monotonic() + 120
        while True:  # until the new image's environment shows (read mid-exec, it is empty)
            raw = environ.read_bytes()
            if b"ORCH_HOME=" in raw and KEYS["ACME_CRED"].encode() not in raw:
                break
            assert proc.poll() is None, "the daemon exited"
            assert time.monotonic() < deadline, "it never started again clean"
            time.sleep(0.05)
        assert proc.poll() is None
        _assert_no_key(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_plugins_folder_is_part_of_what_a_daemon_must_share(orch_home, tmp_path,
                                                                monkeypatch):
    """A daemon started with another ORCH_PLUGINS_DIR (or with other files in it) loaded
    other plugins: its compat differs, so a run is not handed to it; the variable is one
    the daemon's environment keeps."""
    from orchestrator.daemon.environment import ALLOWED
    from orchestrator.daemon.paths import SETTINGS, compat

    assert "ORCH_PLUGINS_DIR" in ALLOWED and "ORCH_PLUGINS_DIR" in SETTINGS
    folder = tmp_path / "mine"
    folder.mkdir()
    monkeypatch.delenv("ORCH_PLUGINS_DIR", raising=False)
    before = compat()["config"]
    monkeypatch.setenv("ORCH_PLUGINS_DIR", str(folder))
    chosen = compat()["config"]
    (folder / "extra.py").write_text("NAME = 'extra'\n")
    assert len({before, chosen, compat()["config"]}) == 3
