"""stdout closed early (``orch runs | head -1``): exit 0, or the run's own code, no traceback.

Through the real entry point: stdout is a pipe whose reader is already gone (every write
meets EPIPE), or a real ``| head -1``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.testing.daemon import daemon_in_thread
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]


def closed_stdout(args: list[str]) -> tuple[int, str]:
    """``orch ARGS`` with a stdout nobody reads: (exit code, stderr)."""
    read, write = os.pipe()
    os.close(read)  # the reader left before the first byte
    try:
        proc = subprocess.run([*ORCH, *args], stdout=write, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=120)
    finally:
        os.close(write)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def head_one(args: list[str]) -> tuple[int, str, str]:
    """``orch ARGS | head -1``: (orch's exit code, what head printed, orch's stderr)."""
    script = ('"$@" 2>err.log | head -1; echo "${PIPESTATUS[0]}" > code.txt')
    proc = subprocess.run(["bash", "-c", script, "orch", *ORCH, *args], capture_output=True,
                          text=True, timeout=120, cwd=os.environ["ORCH_HOME"])
    home = os.environ["ORCH_HOME"]
    with open(os.path.join(home, "code.txt")) as fh:
        code = int(fh.read())
    with open(os.path.join(home, "err.log")) as fh:
        return code, proc.stdout, fh.read()


@pytest.fixture
def waves(orch, scripted_server):
    orch.provider()
    scripted_server.default = Reply(text="line one\n" * 2000)  # more than a pipe holds
    return [orch.run_wave(["a", "b", "c"]).doc["wave_id"] for _ in range(3)]


def quiet(code: int, stderr: str, expected: int = 0) -> None:
    assert code == expected, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert "internal error" not in stderr and "Exception ignored" not in stderr, stderr


@pytest.mark.parametrize("args", [["runs"], ["runs", "--json"], ["status", "WAVE"],
                                  ["status", "WAVE", "--json"], ["spend"], ["models"],
                                  ["--help"], ["doctor", "--json"]])
def test_a_closed_stdout_is_a_quiet_exit(waves, args):
    args = [waves[0] if a == "WAVE" else a for a in args]
    code, stderr = closed_stdout(args)
    own = subprocess.run([*ORCH, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         timeout=120).returncode  # doctor: its own verdict, read or not
    quiet(code, stderr, own)


def test_head_one_of_runs_and_status(waves):
    code, out, err = head_one(["runs"])
    quiet(code, err)
    assert out.startswith("ID")
    code, out, err = head_one(["status", waves[0], "--json"])
    quiet(code, err)
    assert out.strip() == "{"


def test_a_fanout_whose_reader_left_finishes_its_wave(orch, scripted_server):
    orch.provider()
    scripted_server.default = Reply(text="long answer\n" * 5000)
    code, stderr = closed_stdout(["fanout", "-m", "scripted/a,scripted/b", "-p", "x"])
    quiet(code, stderr)
    (wave,) = (orch.home / "runs").glob("*/wave.json")
    assert '"status": "complete"' in wave.read_text()


@pytest.mark.slow
def test_through_the_daemon_and_serve_status(orch, scripted_server, tmp_path, monkeypatch):
    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    orch.provider()
    scripted_server.default = Reply(text="long answer\n" * 5000)
    with daemon_in_thread() as daemon:
        quiet(*closed_stdout(["serve", "status"]))
        code, out, err = head_one(["serve", "status"])
        quiet(code, err)
        assert out.strip()
        quiet(*closed_stdout(["fanout", "-m", "scripted/a", "-p", "x"]))
        assert daemon.served == 1
