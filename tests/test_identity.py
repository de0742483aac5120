"""Ids that cannot collide, ``orch status`` that names one wave or says why not, liveness that
a reused pid cannot fake, and --retry-failed that never pays for a complete leg twice."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.engine.wave import new_wave_id
from orchestrator.errors import OrchError
from orchestrator.pids import process_started, same_process
from orchestrator.testing.scripted_server import Reply


def orch_cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_ids_carry_64_random_bits_behind_a_sortable_time_prefix():
    ids = [new_wave_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)  # 16 random bits per second had 28 duplicates in 2,000
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{16}", i) for i in ids)


def test_a_wave_directory_is_created_exclusively(orch, scripted_server):
    orch.provider()
    first = orch.run_leg("m")
    with pytest.raises(OrchError, match="already exists"):
        orch.run_leg("m", wave_id=first.doc["wave_id"])
    assert scripted_server.count("m") == 1  # the second wave sent nothing


def test_status_takes_an_exact_id_or_a_unique_prefix(orch, scripted_server):
    orch.provider()
    a = orch.run_leg("m").doc["wave_id"]
    b = orch.run_leg("m").doc["wave_id"]
    day = a[:8]
    result = orch_cli("status", day)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"orch: error: ambiguous: 2 runs match '{day}'")
    for wave_id in (a, b):
        exact = orch_cli("status", wave_id, "--json")
        assert json.loads(exact.stdout)["wave_id"] == wave_id
        unique = wave_id[:-10]
        assert json.loads(orch_cli("status", unique, "--json").stdout)["wave_id"] == wave_id
    # a leg's directory name is not a wave
    assert "no run" in orch_cli("status", f"{a}-1").stderr
    assert "no run" in orch_cli("status", "2999").stderr


def test_process_start_time_tells_a_reused_pid_apart():
    me = os.getpid()
    assert same_process(me, process_started(me))
    assert not same_process(me, "1")  # the same pid, another process's start
    assert same_process(me, None)  # recorded before start times: the pid alone


def _stale(orch_home, wave_id: str) -> None:
    """wave.json as a killed run left it: running, with a pid that is alive again (ours)
    but belongs to another process now."""
    path = orch_home / "runs" / wave_id / "wave.json"
    doc = json.loads(path.read_text())
    doc.update(status="running", pid=os.getpid(), pid_started="1")
    for leg in doc["legs"]:
        leg["status"] = "pending"
    path.write_text(json.dumps(doc))


def test_a_dead_wave_behind_a_reused_pid_is_not_running(orch, scripted_server, orch_home):
    orch.provider()
    scripted_server.script("ok", Reply(text="fine"))
    scripted_server.script("flaky", Reply(status=503))
    wave_id = orch.run_wave(["ok", "flaky"]).doc["wave_id"]
    _stale(orch_home, wave_id)
    doc = json.loads(orch_cli("status", wave_id, "--json").stdout)
    assert doc["rebuilt"] and not doc["alive"]
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "error"]
    assert doc["status"] == "partial"


def test_retry_failed_never_reruns_a_complete_leg(orch, scripted_server, orch_home):
    """The issue's case: with pid reuse the stale wave looked running and --retry-failed
    re-ran (and paid again for) a leg that had completed."""
    orch.provider()
    scripted_server.script("ok", Reply(text="fine"))
    scripted_server.script("flaky", Reply(status=503), Reply(text="better"))
    wave_id = orch.run_wave(["ok", "flaky"]).doc["wave_id"]
    _stale(orch_home, wave_id)
    result = orch_cli("fanout", "--retry-failed", wave_id[:-6], "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert [leg["model"] for leg in doc["legs"]] == ["scripted/flaky"]
    assert doc["retry_of"] == wave_id
    assert scripted_server.count("ok") == 1


def test_retry_failed_refuses_a_wave_that_is_still_running(orch, scripted_server, orch_home):
    from orchestrator.pids import process_started

    orch.provider()
    scripted_server.script("flaky", Reply(status=503))
    wave_id = orch.run_leg("flaky").doc["wave_id"]
    path = orch_home / "runs" / wave_id / "wave.json"
    doc = json.loads(path.read_text())
    doc.update(status="running", pid=os.getpid(), pid_started=process_started(os.getpid()))
    path.write_text(json.dumps(doc))
    result = orch_cli("fanout", "--retry-failed", wave_id)
    assert result.exit_code == 1 and "is still running" in result.stderr
    assert scripted_server.count("flaky") == 1
