"""Ctrl-C during `orch bench` keeps what was measured: a real SIGINT to a real `orch bench`
process mid-run leaves a partial results file (marked interrupted, naming the trials graded
and those cut short), exits 130 and says where the file is in one line. Before, the process
left with 130 and no results file at all."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
TASKS = ["t1", "t2", "t3", "t4"]

# a command contestant: quick on t1 and t2, stuck on t3 (it says so in a folder it may
# write, so the test can prove the interrupt killed it: it runs in its own session, so
# Ctrl-C never reaches it; confined, its pid is its namespace's, so the test finds it by name)
AGENT = """\
import os, pathlib, re, sys, time
task = re.search(r"Task (t[0-9]+)", sys.stdin.read()).group(1)
if task in ("t1", "t2"):
    print("CODE-" + task)
    sys.exit(0)
pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
time.sleep(600)
"""


def reply(body, n):
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    task = re.search(r"Task (t\d+)", prompt).group(1)
    if task in ("t1", "t2"):
        return Reply(text=f"CODE-{task}", usage={"prompt_tokens": 50, "completion_tokens": 5})
    return Reply(hang=True)  # the interrupt finds this trial on the wire


def setup_bench(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    for task in TASKS:
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: reply with CODE-{task}.",
             "expect": {"contains": [f"CODE-{task}"]}, "solution": f"CODE-{task}"}))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    (tmp_path / "agent-out").mkdir()
    pidfile = tmp_path / "agent-out" / "stuck.pid"
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1
        jobs = 1

        [[contestants]]
        name = "model"
        model = "scripted/m"
        tools = "none"

        [[contestants]]
        name = "agent"
        kind = "command"
        command = "{sys.executable}"
        args = ["{agent}", "{pidfile}"]
        writable = ["{pidfile.parent}"]
        """))
    return config, pidfile


def running_script(script) -> list[int]:
    """Host pids of processes running ``script`` (seen from outside any sandbox)."""
    pids = []
    for proc in os.listdir("/proc"):
        try:
            cmdline = open(f"/proc/{proc}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [sys.executable.encode(), str(script).encode()]:  # not bwrap's
            pids.append(int(proc))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.usefixtures("both_ways")  # also through orch serve: the client's Ctrl-C
def test_sigint_mid_bench_writes_the_partial_results_and_exits_130(
        orch, scripted_server, orch_home, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("m", reply)
    config, pidfile = setup_bench(tmp_path)
    out = tmp_path / "results.json"
    err_path = tmp_path / "stderr.txt"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    with err_path.open("w") as err_file:
        proc = subprocess.Popen([*ORCH, "bench", "--config", str(config), "--yes",
                                 "--out", str(out), *unsafe_unless_confined()], env=env,
                                cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            deadline = time.monotonic() + 90
            # both contestants are stuck on t3: the model on the wire, the command asleep
            while time.monotonic() < deadline and not (
                    pidfile.exists() and pidfile.read_text()
                    and any("t3" in json.dumps(r.body) for r in scripted_server.requests)
                    and err_path.read_text().count("PASS ") == 4):  # t2 graded (in a thread)
                time.sleep(0.05)
            assert pidfile.exists(), err_path.read_text()
            [stuck] = running_script(tmp_path / "agent.py")
            assert err_path.read_text().count("PASS ") == 4  # t1 and t2, both contestants
            proc.send_signal(signal.SIGINT)
            stdout, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = err_path.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == (f"orch: interrupted (SIGINT) after 4 of 8 trials; partial results: "
                    f"{out} (report: {out.with_suffix('')}/report.md; "
                    f"`orch bench resume {out}` runs the rest)")
    doc = json.loads(out.read_text())
    assert doc["interrupted"] == {"signal": 2, "signal_name": "SIGINT", "planned": 8,
                                  "complete": [1, 2, 3, 4], "cut_short": [5, 6],
                                  "not_started": 2}
    rows = {r["n"]: r for r in doc["trials"]}
    assert sorted(rows) == [1, 2, 3, 4, 5, 6]
    assert all(rows[n]["passed"] and rows[n]["excluded"] is None for n in (1, 2, 3, 4))
    for n in (5, 6):  # cut short: kept and listed, never counted as a failure
        assert rows[n]["task"] == "t3" and not rows[n]["passed"]
        assert rows[n]["excluded"] == "interrupted: SIGINT arrived before it was graded"
    assert rows[5]["status"] == "aborted" and rows[5]["contestant"] == "model"
    assert {(e["task"], e["contestant"]) for e in doc["exclusions"]} == \
        {("t3", "model"), ("t3", "agent")}
    # the statistics cover what was graded: every counted trial passed
    assert {r["contestant"]: (r["trials"], r["pass"]["value"])
            for r in doc["stats"]["rows"]} == {"model": (2, 1.0), "agent": (2, 1.0)}
    report = (out.with_suffix("") / "report.md").read_text()
    assert "Interrupted (SIGINT): partial results, 4 of 8 trials graded" in report
    assert not alive(stuck)  # the command contestant's process group was killed
    # the model wave's wave.json is final: no leg left pending or running
    wave = json.loads(next((orch_home / "runs").glob("bench-*-1/wave.json")).read_text())
    assert wave["signal"] == signal.SIGINT
    assert [leg["status"] for leg in wave["legs"]] == ["complete", "complete", "aborted",
                                                       "aborted"]
    assert scripted_server.count("m") == 3  # t4 was never sent
