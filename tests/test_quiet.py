"""`-q` silences everything on stderr but errors: the rate gate's rate_limit_hold warning
included (it used to leak). Real 429s from the scripted server. A real process proves the
promise for `orch fanout` and for a broken plugin's warning (what a process writes to its
stderr, whoever writes it); the rest run in-process (click's runner: orch's log lines go to
whatever ``sys.stderr`` is)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.testing.scripted_server import Reply


def fanout(home, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "ORCH_HOME": str(home), **env}
    full.pop("LOG_LEVEL", None) if "LOG_LEVEL" not in env else None
    return subprocess.run([sys.executable, "-m", "orchestrator", "fanout", "-m", "scripted/m",
                           "-p", "hi", *args], env=full, capture_output=True, text=True,
                          timeout=120)


def fanout_here(*args: str, monkeypatch, **env: str):
    """``orch fanout -m scripted/m -p hi ARGS`` in this process, LOG_LEVEL as a user's shell
    would have it (unset unless given)."""
    from click.testing import CliRunner

    from orchestrator import runtime
    from orchestrator.cli import cli

    monkeypatch.delenv("LOG_LEVEL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    runtime.configure_logging.cache_clear()  # set up for this command, as a new process is
    return CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", *args])


@pytest.fixture
def held(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=0.1), Reply(text="ok"))
    return orch.home


def test_without_q_the_hold_is_said(held, scripted_server, monkeypatch):
    done = fanout_here(monkeypatch=monkeypatch)
    assert done.exit_code == 0, done.output
    assert scripted_server.count("m") == 2  # the hold really happened
    assert "rate_limit_hold" in done.stderr


def test_q_leaves_stderr_empty_when_nothing_failed(held, scripted_server):
    done = fanout(held, "-q")
    assert done.returncode == 0 and "ok" in done.stdout
    assert scripted_server.count("m") == 2  # the hold really happened
    assert done.stderr == ""


def test_q_still_shows_errors(orch, scripted_server, monkeypatch):
    orch.provider()
    done = fanout_here("-q", "--context", str(orch.home / "no-such-file"),
                       monkeypatch=monkeypatch)
    assert done.exit_code == 2  # a usage mistake
    assert done.stderr.startswith("orch: error:") and "no-such-file" in done.stderr


def test_an_explicit_log_level_wins_over_q(held, scripted_server, monkeypatch):
    done = fanout_here("-q", monkeypatch=monkeypatch, LOG_LEVEL="warning")
    assert done.exit_code == 0, done.output
    assert "rate_limit_hold" in done.stderr


def test_council_run_q_is_quiet_too(orch, scripted_server, monkeypatch):
    from test_council_run import SEATS, script_bench, seat

    orch.provider()
    first = seat("alpha")

    def alpha(body, n):  # one 429 before the first review: the gate holds, then it goes on
        return Reply(status=429, retry_after=0.1) if n == 1 else first(body, n)

    script_bench(scripted_server, alpha=alpha)
    from click.testing import CliRunner

    from orchestrator import runtime
    from orchestrator.cli import cli

    monkeypatch.delenv("LOG_LEVEL", raising=False)
    runtime.configure_logging.cache_clear()
    done = CliRunner().invoke(cli, ["council", "run", "-p", "Review the query layer.", "-m",
                                    SEATS, "--chair", "scripted/delta", "-q"])
    assert done.exit_code == 0, done.output
    assert any(r.status == 429 for r in scripted_server.requests)
    assert done.stderr == ""


def test_q_silences_a_broken_plugins_warning_too(held, scripted_server, tmp_path):
    from test_plugins_loading import Site

    site = Site(tmp_path / "site")
    site.path.mkdir()
    site.install("orch-test-broken", "1.0", {"broken": "import no_such_module_here\n"})
    loud = fanout(held, PYTHONPATH=str(site.path))
    assert "orch: warning: plugin broken skipped: ModuleNotFoundError" in loud.stderr
    scripted_server.script("m", Reply(text="ok"))
    quiet = fanout(held, "-q", PYTHONPATH=str(site.path))
    assert quiet.returncode == 0 and quiet.stderr == ""
