"""`-q` silences everything on stderr but errors: the rate gate's rate_limit_hold warning
included (it used to leak). Real processes, real 429s from the scripted server."""

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


@pytest.fixture
def held(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=0.1), Reply(text="ok"))
    return orch.home


def test_without_q_the_hold_is_said(held, scripted_server):
    done = fanout(held)
    assert done.returncode == 0, done.stderr
    assert "rate_limit_hold" in done.stderr


def test_q_leaves_stderr_empty_when_nothing_failed(held, scripted_server):
    done = fanout(held, "-q")
    assert done.returncode == 0 and "ok" in done.stdout
    assert scripted_server.count("m") == 2  # the hold really happened
    assert done.stderr == ""


def test_q_still_shows_errors(orch, scripted_server):
    orch.provider()
    done = fanout(orch.home, "-q", "--context", str(orch.home / "no-such-file"))
    assert done.returncode == 2  # a usage mistake
    assert done.stderr.startswith("orch: error:") and "no-such-file" in done.stderr


def test_an_explicit_log_level_wins_over_q(held, scripted_server):
    done = fanout(held, "-q", LOG_LEVEL="warning")
    assert "rate_limit_hold" in done.stderr


def test_council_run_q_is_quiet_too(orch, scripted_server):
    from test_council_run import SEATS, script_bench, seat

    orch.provider()
    first = seat("alpha")

    def alpha(body, n):  # one 429 before the first review: the gate holds, then it goes on
        return Reply(status=429, retry_after=0.1) if n == 1 else first(body, n)

    script_bench(scripted_server, alpha=alpha)
    full = {**os.environ, "ORCH_HOME": str(orch.home)}
    full.pop("LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "council", "run", "-p", "Review the query "
         "layer.", "-m", SEATS, "--chair", "scripted/delta", "-q"], env=full,
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
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
