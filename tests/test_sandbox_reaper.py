"""Every process an untrusted program starts ends with it (issue 41 item 1), with or without
bubblewrap: a program that escapes its process group and session with `setsid`, a
double-forked daemon, a check killed at its time limit with a child of its own, an interrupt,
and orch itself killed with -9. Before, each escapee outlived the bench wherever bubblewrap
was not the boundary (python checks, a killed check's child, `--unsafe-checks`): only the
program's process group was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from orchestrator.sandbox import bwrap, environment
from orchestrator.sandbox.process import Limits, Running, run

needs_bwrap = pytest.mark.skipif(bwrap.usable() is not None,
                                 reason=f"no sandbox here: {bwrap.usable()}")


def token() -> str:
    """A sleep length no other process on the machine has: its command line names it."""
    return f"{900000 + uuid.uuid4().int % 99999}.{uuid.uuid4().int % 10**6:06d}"


def living(tok: str) -> list[int]:
    """Host pids of ``sleep TOK`` (the escapee itself: the command lines that started it
    hold the token too; zombies are not living)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == f"sleep\0{tok}\0".encode() and state != b"Z":
            out.append(int(pid))
    return out


def gone(tok: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while living(tok):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def launch(argv: list[str], *, timeout: float = 30.0, running: Running | None = None,
           confined: bool = False):
    """``argv`` run as a bench runs it: unconfined behind the reaper, or under bwrap, whose
    PID namespace is then the boundary (``reap=False``, as ``Guard.reaps`` says)."""
    if confined:
        argv = bwrap.argv(bwrap.Confinement(cwd=Path("/tmp")), argv, bwrap.found())
    return run(argv, cwd="/tmp", env=environment.confined(), limits=Limits(timeout_s=timeout),
               running=running, reap=not confined)


def escape(tok: str, then: str = "exit 0") -> list[str]:
    """A program that leaves a process behind in a session of its own, then ``then``."""
    return ["sh", "-c", f"setsid sleep {tok} </dev/null >/dev/null 2>&1 & "
                        f"while [ -z \"$(pgrep -f '^sleep {tok}$')\" ]; do :; done; {then}"]


DAEMON = """\
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.execvp("sleep", ["sleep", sys.argv[1]])
"""


@pytest.mark.parametrize("confined", [False, pytest.param(True, marks=needs_bwrap)],
                         ids=["unconfined", "bwrap"])
def test_a_process_that_escapes_with_setsid_ends_with_the_program(confined):
    tok = token()
    done = launch(escape(tok, "echo started"), confined=confined)
    assert done.exit_code == 0 and done.stdout.text() == "started\n"
    assert gone(tok, within=2.0), living(tok)  # ended before run() returned, or at once


def test_a_double_forked_daemon_ends_with_the_program(tmp_path):
    tok = token()
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    done = launch([sys.executable, str(script), tok])
    assert done.exit_code == 0
    assert gone(tok, within=2.0), living(tok)


def test_at_its_time_limit_the_program_and_its_escaped_child_end():
    tok = token()
    started = time.monotonic()
    done = launch(escape(tok, "sleep 600"), timeout=1.5)
    assert done.timed_out and done.killed_by == "SIGKILL"
    assert time.monotonic() - started < 15
    assert gone(tok, within=2.0), living(tok)


@pytest.mark.parametrize("confined", [False, pytest.param(True, marks=needs_bwrap)],
                         ids=["unconfined", "bwrap"])
def test_an_interrupt_ends_the_program_and_every_escapee(confined):
    tok = token()
    running = Running()
    seen = threading.Event()

    def stop_when_escaped():
        deadline = time.monotonic() + 20
        while not living(tok) and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.set()
        running.stop()

    threading.Thread(target=stop_when_escaped, daemon=True).start()
    done = launch(escape(tok, "sleep 600"), running=running, confined=confined)
    assert seen.is_set() and done.interrupted and done.killed_by == "SIGKILL"
    assert done.sandbox_failed() is None  # bwrap's own end is not taken for a set-up failure
    assert gone(tok, within=2.0), living(tok)


def test_orch_killed_with_9_takes_the_program_and_its_escapee_with_it(tmp_path):
    """The reaper's parent-death signal: the orch process that ran it is gone, it ends all."""
    tok = token()
    host = tmp_path / "host.py"
    host.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from orchestrator.sandbox import environment
        from orchestrator.sandbox.process import Limits, run
        run({escape(tok, "sleep 600")!r}, cwd="/tmp", env=environment.confined(),
            limits=Limits(timeout_s=600))
        """))
    proc = subprocess.Popen([sys.executable, str(host)])
    try:
        deadline = time.monotonic() + 30
        while not living(tok) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert living(tok), "the program never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone(tok, within=10.0), living(tok)


def test_exit_codes_signals_limits_and_a_program_that_cannot_start(tmp_path):
    """What the launcher must not change: the program's own end, its rlimits."""
    assert launch(["sh", "-c", "echo out; echo err >&2; exit 3"]).exit_code == 3
    crashed = launch(["sh", "-c", "kill -SEGV $$"])
    assert crashed.exit_code == -signal.SIGSEGV and crashed.killed_by == "SIGSEGV"
    missing = launch(["no-such-program-orch-test"])
    assert missing.exit_code is None
    assert missing.error == "cannot start no-such-program-orch-test: No such file or directory"
    fed = run(["cat"], cwd="/tmp", env=environment.confined(), stdin=b"prompt",
              limits=Limits(timeout_s=30))
    assert fed.stdout.data == b"prompt"
    big = run(["sh", "-c", f"head -c 3000000 /dev/zero > {tmp_path}/big"], cwd=tmp_path,
              env=environment.confined(), limits=Limits(timeout_s=30, file_mb=1))
    assert big.exit_code != 0 and (tmp_path / "big").stat().st_size == 1 << 20
    hungry = run([sys.executable, "-c", "bytearray(600 << 20)"], cwd="/tmp",
                 env=environment.confined(), limits=Limits(timeout_s=30, memory_mb=200))
    assert hungry.exit_code == 1 and "MemoryError" in hungry.stderr.text()
