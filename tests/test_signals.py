"""Signals are watched from process start to exit: a SIGTERM while ``wave_start`` hooks run
(the local server starting) still ends the wave with a final wave.json and exit 143."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
NEVER_HEALTHY = "import time; time.sleep(120)"  # a local server that never comes up


@pytest.mark.usefixtures("both_ways")  # through orch serve, the start runs on the daemon
def test_sigterm_during_wave_start_leaves_a_final_wave_json(orch_home, tmp_path):
    """...and the interrupted start lets go of the server lock at once (in the daemon, the
    next job must not wait for it) and leaves no server that nothing tracks."""
    from orchestrator.local import manager
    from orchestrator.local import state as st

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF tiny")
    from orchestrator.local.model import sha256_file

    (orch_home / "config.json").write_text(json.dumps({"local": {
        "models": {"gemma3-270m": {"path": str(gguf), "sha256": sha256_file(gguf)}},
        "server_command": ["{python}", "-c", f"{NEVER_HEALTHY}  # {tmp_path}"]}}))
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "local/gemma3-270m", "-p", "x", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = orch_home / "runs"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(runs.glob("*/wave.json")):
            time.sleep(0.05)
        assert list(runs.glob("*/wave.json")), "wave.json is written before wave_start"
        time.sleep(0.5)  # wave_start is waiting for the server
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        with st.server_lock(timeout_s=10):  # free: another job can check or start a server
            tracked = st.read_state() or {}
            left = _processes_naming(str(tmp_path))
            assert set(left) <= {tracked.get("pid"), tracked.get("server_pid")}, left
    finally:
        if proc.poll() is None:
            proc.kill()
        manager.stop()
    assert not _processes_naming(str(tmp_path))
    assert proc.returncode == 143, err
    doc = json.loads(out)
    wave = json.loads(next(runs.glob("*/wave.json")).read_text())
    assert wave["status"] == doc["status"] == "aborted" and wave["signal"] == signal.SIGTERM
    assert wave["legs"][0]["status"] == "aborted"


def _processes_naming(text: str) -> dict[int, str]:
    """Live processes whose command line holds ``text`` (the supervisor names its launch file
    under ORCH_HOME; the fake server's command carries the test's directory)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            zombie = "Z" in (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in argv and not zombie:
            found[int(entry.name)] = argv
    return found


@pytest.mark.usefixtures("both_ways")  # also with orch serve up: the client's SIGTERM
@pytest.mark.refused_before_the_daemon  # while it prepares (reads stdin): the daemon never hears
def test_sigterm_before_any_wave_is_one_line_and_143(orch_home, scripted_server):
    """Outside a wave (reading a briefing from a stdin that never ends) SIGTERM is still
    handled: one line, exit 143, no traceback."""
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    (orch_home / "config.json").write_text(json.dumps(
        {"providers": {"scripted": {"base_url": scripted_server.url}}}))
    scripted_server.script("m", Reply(text="never asked"))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/m"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(5)  # started, waiting on stdin
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert err.strip().splitlines()[-1] == "orch: terminated" and "Traceback" not in err
    assert scripted_server.count() == 0
