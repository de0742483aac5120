"""Tools cannot freeze a wave: worker threads with deadlines, RE2, bounds named in the result,
the leg's timeout and signals honoured mid-tool, nothing keeping the process alive after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]


def call(name: str, id: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments, "id": id}


def tool_results(body: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def env_for(home, **extra) -> dict[str, str]:
    env = dict(os.environ, ORCH_HOME=str(home))
    env.pop("ORCH_RUNS_DIR", None)
    env.update(extra)
    return env


def test_a_redos_pattern_answers_at_once_and_the_healthy_leg_completes(
        orch, scripted_server, tmp_path):
    """The issue's case: grep (a+)+$ over 27 a's and a '!' froze every leg for 19.6 s on a
    backtracking engine. On RE2 it is linear: both legs complete, the pattern matches nothing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "evil.txt").write_text("a" * 27 + "!\n" + "a" * 5000 + "!\n")
    scripted_server.script("redos", Reply(tool_calls=[call("grep", "g", pattern="(a+)+$")]),
                           Reply(text="searched"))
    scripted_server.script("healthy", Reply(text="fine", latency=0.5))
    from orchestrator.runtime import litellm

    litellm()  # imported before the clock starts, as orch fanout does
    run = orch.run_wave(["redos", "healthy"], workspace=ws, timeout_s=6)
    assert [leg["status"] for leg in run.legs] == ["complete", "complete"], run.legs[0]["reason"]
    result = tool_results(scripted_server.requests_for("redos")[1].body)["g"]
    assert result.startswith("no matches for '(a+)+$'")
    # a frozen loop would have ended both at the 6 s leg timeout
    assert all(leg["duration_s"] < 6 for leg in run.legs)


def test_a_backreference_is_refused_with_the_rule(orch, scripted_server, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("abab\n")
    scripted_server.script("m", Reply(tool_calls=[call("grep", "g", pattern=r"(ab)\1")]),
                           Reply(text="ok"))
    run = orch.run_leg("m", workspace=ws)
    result = tool_results(run.bodies[1])["g"]
    assert result.startswith("error: pattern '(ab)\\\\1' is not a valid RE2 regular expression")
    assert "backreferences" in result


def test_a_grep_stops_at_its_byte_bound_and_says_so(orch, scripted_server, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in range(4):
        (ws / f"f{n}.txt").write_text("nothing to see here\n" * 2000)  # 40,000 bytes each
    orch.config(plugin_config={"workspace": {"max_scan_bytes": 50_000}})
    scripted_server.script("m", Reply(tool_calls=[call("grep", "g", pattern="needle")]),
                           Reply(text="ok"))
    run = orch.run_leg("m", workspace=ws)
    result = tool_results(run.bodies[1])["g"]
    assert "stopped after reading 50,000 bytes (max_scan_bytes)" in result
    assert "the search is incomplete" in result


def test_a_grep_over_the_whole_filesystem_stops_at_its_time_bound(orch, scripted_server):
    orch.config(plugin_config={"workspace": {"max_seconds": 1}})
    scripted_server.script("m", Reply(tool_calls=[call("grep", "g",
                                                       pattern="no-such-text-q8z7x")]),
                           Reply(text="ok"))
    run = orch.run_leg("m", workspace="/")
    result = tool_results(run.bodies[1])["g"]
    assert "stopped at the 1 s limit (max_seconds)" in result or \
        "stopped after reading" in result
    assert run.leg["status"] == "complete"


def test_a_blocking_tool_cannot_hold_its_leg_past_the_timeout_nor_touch_another(
        orch, scripted_server):
    """A plugin's plain function that spins holds no leg hostage: it runs on a daemon thread,
    the leg's timeout ends the wait mid-call, the other leg completes, the thread is told to
    stop and nobody waits for it."""
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    stop_seen = []

    def spin() -> str:
        from orchestrator import tool_thread

        end = time.monotonic() + 30
        while time.monotonic() < end:
            if tool_thread.expired():
                stop_seen.append(True)
                return "stopped"
            sum(range(1000))  # pure Python: holds the GIL between switches
        return "spun"

    class Spinner:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("spin", "Spin.", {"type": "object", "properties": {}}, spin)]

    from orchestrator.runtime import litellm

    litellm()  # imported before the clock starts, as orch fanout does
    scripted_server.script("spinner", Reply(tool_calls=[call("spin", "s")]), Reply(text="x"))
    scripted_server.script("healthy", Reply(text="fine", latency=0.3))
    run = orch.run_wave(["spinner", "healthy"], plugins=[("spinner", Spinner())],
                        timeout_s=1.0)
    spinner, healthy = run.legs
    assert healthy["status"] == "complete"
    assert spinner["status"] == "error" and spinner["reason"].startswith("timeout")
    assert spinner["duration_s"] < 1.0 + 0.5  # the leg's timeout, honoured mid-tool
    deadline = time.monotonic() + 5
    while not stop_seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stop_seen  # the abandoned thread was told to stop, and did


def test_a_plain_tool_past_its_own_limit_gets_an_error_result(orch, scripted_server):
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class Sleeper:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("nap", "Nap.", {"type": "object", "properties": {}},
                         lambda: time.sleep(5) or "rested", meta={"max_seconds": 0.2})]

    scripted_server.script("m", Reply(tool_calls=[call("nap", "n")]), Reply(text="done"))
    run = orch.run_leg("m", plugins=[("sleeper", Sleeper())], timeout_s=30)
    assert run.leg["status"] == "complete"
    assert tool_results(run.bodies[1])["n"] == \
        "error: nap failed: ToolTimeout: did not finish within its 0.2 s limit"


@pytest.mark.slow
def test_workspace_root_grep_past_the_leg_timeout_lets_the_process_exit(
        orch, scripted_server, orch_home):
    """The issue's hang: --workspace / with a grep that matches nothing. The leg ends at its
    timeout mid-grep; the results print and the process exits (no thread keeps it alive)."""
    orch.provider()
    orch.config(plugin_config={"workspace": {"max_seconds": 600, "max_scan_bytes": 10**12}})
    scripted_server.script("m", Reply(tool_calls=[call("grep", "g",
                                                       pattern="no-such-text-q8z7x")]),
                           Reply(text="never"))
    scripted_server.script("ok", Reply(text="fine"))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/m,scripted/ok", "-p", "x",
                             "--workspace", "/", "--workspace-any", "--timeout", "0.02", "--json"],
                            env=env_for(orch_home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    m, ok = doc["legs"]
    assert m["status"] == "error" and m["reason"].startswith("timeout"), err
    # the other leg answers within 0.02 s on a quiet machine; on a loaded one it may time
    # out too (then no leg completed: exit 1): either way the wave ends and says so
    assert (ok["status"], proc.returncode) == ("complete", 2) or (
        ok["reason"] or "").startswith("timeout") and proc.returncode == 1, err
    ended = time.time()
    from datetime import datetime

    wave_end = datetime.fromisoformat(doc["ended_at"]).timestamp()
    # exit within 1 s of the wave (slack for interpreter teardown on a loaded machine): no
    # tool thread keeps the process alive, where it used to hang until killed
    assert ended - wave_end < 1.0 + 2.0


@pytest.mark.slow
def test_sigint_is_honoured_mid_tool(orch, scripted_server, orch_home):
    orch.provider()
    orch.config(plugin_config={"workspace": {"max_seconds": 600, "max_scan_bytes": 10**12}})
    scripted_server.script("m", Reply(tool_calls=[call("grep", "g",
                                                       pattern="no-such-text-q8z7x")]),
                           Reply(text="never"))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/m", "-p", "x",
                             "--workspace", "/", "--workspace-any", "--json"],
                            env=env_for(orch_home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while scripted_server.count("m") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the grep is walking /
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    exited = time.time() - sent
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["legs"][0]["status"] == "aborted"
    from datetime import datetime

    honoured = datetime.fromisoformat(doc["ended_at"]).timestamp() - sent
    # honoured within 1 s (slack for a machine shared by many test runs), then a prompt exit
    assert honoured < 1.0 + 1.0, honoured
    assert exited < 10, exited
