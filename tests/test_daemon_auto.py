"""`daemon: auto`, the default: with no configuration the first `orch fanout` runs in-process
and starts a daemon; the next runs go through it. `--no-daemon`, `ORCH_DAEMON=off` and
`"daemon": "off"` keep every run in-process and start nothing.

The suite runs with ``ORCH_DAEMON=manual`` (orchestrator.testing's pytest plugin); these
tests unset it, each with its own XDG_RUNTIME_DIR and ORCH_HOME, and stop what they started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.daemon import client, daemon_in_thread, serve_processes
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
NOTE = "started a warm daemon in the background"


def wait_for(predicate, timeout: float = 90.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)


@pytest.fixture
def xdg(tmp_path, monkeypatch, orch_home):
    """No daemon configuration at all: ORCH_DAEMON unset, a runtime directory of this test."""
    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.delenv("ORCH_DAEMON")
    yield run
    for pid in serve_processes(tmp_path):  # a failed test leaves nothing running
        os.kill(pid, signal.SIGTERM)


def test_the_second_run_goes_through_the_daemon_the_first_started(orch, xdg, tmp_path):
    orch.provider()
    orch.server.script("m", Reply(text="one"), Reply(text="two"), Reply(text="3"))
    assert "daemon" not in json.loads((orch.home / "config.json").read_text())

    first = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
    assert first.exit_code == 0, first.stderr
    first_pid = json.loads(first.stdout)["pid"]
    assert NOTE in first.stderr and "ORCH_DAEMON=off" in first.stderr  # said, with the off
    wait_for(lambda: client(["serve", "status"]).exit_code == 0, what="the daemon answers")
    status = json.loads(client(["serve", "status", "--json"]).stdout)
    assert serve_processes(tmp_path) == [status["pid"]]  # one daemon, from this test's env
    assert first_pid != status["pid"]  # the first ran in its own process

    second = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
    assert second.exit_code == 0, second.stderr
    doc = json.loads(second.stdout)
    assert doc["pid"] == status["pid"]  # the daemon ran the wave
    assert NOTE not in second.stderr
    log = (xdg / "orch" / "serve.log").read_text()
    assert f"listening on {xdg / 'orch' / 'orch.sock'} (pid {status['pid']}" in log
    assert json.loads(client(["serve", "status", "--json"]).stdout)["jobs_served"] == 1

    stopped = client(["serve", "stop"])
    assert stopped.exit_code == 0 and f"pid {status['pid']}" in stopped.stdout
    wait_for(lambda: not Path(f"/proc/{status['pid']}").exists(), what="its exit")
    assert serve_processes(tmp_path) == []


@pytest.mark.parametrize("how", ["config off", "--no-daemon", "ORCH_DAEMON=off"])
def test_off_keeps_the_run_in_process_and_starts_nothing(orch, xdg, tmp_path, monkeypatch,
                                                         how):
    orch.provider()
    orch.server.script("m", Reply(text="in"))
    argv = ["fanout", "-m", "scripted/m", "-p", "x", "--json"]
    if how == "config off":
        orch.config(daemon="off")
    elif how == "--no-daemon":
        argv.append("--no-daemon")
    else:
        monkeypatch.setenv("ORCH_DAEMON", "off")
    result = client(argv)
    assert result.exit_code == 0, result.stderr
    # only the wave's closing line (said with --json too: orchestrator/notices.py)
    assert NOTE not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("orch: wave "), result.stderr
    time.sleep(1.0)  # a spawned daemon would be a process by now
    assert serve_processes(tmp_path) == []
    assert not (xdg / "orch").exists()  # no lock, no log, no socket
    assert not (orch.home / "run").exists()


def test_off_does_not_use_a_running_daemon_either(orch, xdg):
    orch.provider()
    orch.config(daemon="off")
    orch.server.script("m", Reply(text="in"))
    with daemon_in_thread() as daemon:
        result = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
        assert result.exit_code == 0, result.stderr
        assert daemon.served == 0
    assert json.loads(result.stdout)["pid"] != os.getpid()


def test_two_runs_at_once_start_one_daemon(orch, xdg, tmp_path):
    orch.provider()
    orch.server.script("m", *[Reply(text="x")] * 4)
    procs = [subprocess.Popen([*ORCH, "fanout", "-m", "scripted/m", "-p", "x"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    wait_for(lambda: client(["serve", "status"]).exit_code == 0, what="the daemon answers")
    time.sleep(1.0)
    assert len(serve_processes(tmp_path)) == 1
    assert sum(NOTE in err.decode() for _out, err in outs) == 1  # said once
    assert "another daemon" not in (xdg / "orch" / "serve.log").read_text()
    assert client(["serve", "stop"]).exit_code == 0
    wait_for(lambda: serve_processes(tmp_path) == [], what="its exit")


def test_an_unknown_mode_is_one_line(orch, xdg, monkeypatch):
    orch.provider()
    monkeypatch.setenv("ORCH_DAEMON", "sometimes")
    result = client(["fanout", "-m", "scripted/m", "-p", "x"])
    assert result.exit_code == 1
    assert result.stderr == ("orch: error: ORCH_DAEMON='sometimes' is not one of auto, manual, "
                             "off; fix or unset it\n")
