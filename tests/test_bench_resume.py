"""`orch bench resume` after a real SIGINT runs exactly the trials that were not run or were
cut short (the scripted server's request count proves no trial ran twice); --retry-failed and
--retry-excluded run those again, merged, the report saying so; `orch bench show` reads any
trial back."""

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

from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]
TASKS = ["t1", "t2", "t3", "t4"]


def bench(*args):
    return invoke(["bench", *unsafe_unless_confined(), *args])


def task_of(body):
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return re.search(r"Task (t\d+)", prompt).group(1)


def hang_on_t3(body, n):
    task = task_of(body)
    if task == "t3":
        return Reply(hang=True)  # the interrupt finds this trial on the wire
    return Reply(text=f"CODE-{task}", usage={"prompt_tokens": 50, "completion_tokens": 5})


def right(body, n):
    return Reply(text=f"CODE-{task_of(body)}", usage={"prompt_tokens": 50,
                                                      "completion_tokens": 5})


def write_bench(tmp_path, contestants=("m",)):
    cases = tmp_path / "cases"
    cases.mkdir()
    for task in TASKS:
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: reply with CODE-{task}.",
             "expect": {"contains": [f"CODE-{task}"]}, "solution": f"CODE-{task}"}))
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent("""\
        [bench]
        cases = "cases"
        trials = 1
        jobs = 1
        """) + "".join(f'[[contestants]]\nname = "{c}"\nmodel = "scripted/{c}"\n'
                       'tools = "none"\n' for c in contestants))
    return config


def per_task(server, model):
    counts = {}
    for r in server.requests_for(model):
        counts[task_of(r.body)] = counts.get(task_of(r.body), 0) + 1
    return counts


def test_resume_after_sigint_runs_exactly_the_missing_trials(orch, scripted_server, orch_home,
                                                            tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("m", hang_on_t3)
    config = write_bench(tmp_path)
    out = tmp_path / "results.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen([*ORCH, "bench", "--config", str(config), "--yes", "--out",
                                 str(out), *unsafe_unless_confined()], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not (
                    per_task(scripted_server, "m").get("t3")
                    and err_path.read_text().count("PASS ") == 2):
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err_path.read_text()
    assert f"`orch bench resume {out}` runs the rest" in err_path.read_text()
    first = json.loads(out.read_text())
    assert first["interrupted"]["not_started"] == 1 and first["interrupted"]["cut_short"] == [3]
    assert per_task(scripted_server, "m") == {"t1": 1, "t2": 1, "t3": 1}

    scripted_server.script("m", right)
    result = invoke(["bench", "resume", str(out), "--yes", *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output
    assert "resuming " in result.stderr and "2 trial(s) to run (1 cut short, 1 not run)" \
        in result.stderr
    # t1 and t2 were not sent again; t3 once more (its first try was cut short), t4 once
    assert per_task(scripted_server, "m") == {"t1": 1, "t2": 1, "t3": 2, "t4": 1}
    doc = json.loads(out.read_text())
    assert "interrupted" not in doc and doc["exclusions"] == []
    assert [(r["n"], r["task"], r["passed"]) for r in doc["trials"]] == \
        [(1, "t1", True), (2, "t2", True), (3, "t3", True), (4, "t4", True)]
    assert doc["bench_id"] == first["bench_id"]
    assert doc["trials"][0] == first["trials"][0]  # graded trials kept as they were
    assert doc["resumes"][0]["planned"] == {"cut short": 1, "not run": 1}
    assert doc["stats"]["rows"][0]["pass"]["value"] == 1.0
    report = (out.with_suffix("") / "report.md").read_text()
    assert "Resumed (" in report and "2 trial(s) run again (1 cut short, 1 not run)" in report
    # the resumed waves are new folders, beside the first run's
    waves = sorted(p.parent.name for p in (orch_home / "runs").glob("bench-*/wave.json"))
    assert waves == [f"{doc['bench_id']}-1", f"{doc['bench_id']}-r1-1"]

    again = invoke(["bench", "resume", str(out), "--yes", *unsafe_unless_confined()])
    assert again.exit_code == 0 and "nothing to run" in again.stderr
    assert scripted_server.count("m") == 5

    # any trial can be read back: prompt, answer, steps, check output
    shown = invoke(["bench", "show", str(out), "t3", "m"])
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "== t3 · m #1: PASS" in text
    assert "-- prompt\nTask t3: reply with CODE-t3." in text
    assert "-- answer\nCODE-t3" in text
    assert "-- steps\nstep 1: CODE-t3  [50 in, 5 out]" in text
    assert "-- check output" in text
    listing = invoke(["bench", "show", str(out)]).stdout.splitlines()
    assert [line.split(" · ")[0] for line in listing] == ["PASS t1", "PASS t2", "PASS t3",
                                                          "PASS t4"]
    bad = invoke(["bench", "show", str(out), "t9"])
    assert bad.exit_code == 2 and "no task 't9'" in bad.output and "Traceback" not in bad.output


def test_retry_failed_and_retry_excluded_run_only_those_and_say_so(orch, scripted_server,
                                                                  tmp_path):
    # dear: the ceiling (room for a few trials' allowances) refuses the later trials
    # (excluded), and "a" fails t1, the first trial
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)

    def a_fails_t1(body, n):
        task = task_of(body)
        return Reply(text="no" if task == "t1" else f"CODE-{task}",
                     usage={"prompt_tokens": 50, "completion_tokens": 5})
    scripted_server.script("a", a_fails_t1)
    scripted_server.script("b", right)
    config = write_bench(tmp_path, contestants=("a", "b"))
    out = tmp_path / "r.json"
    result = bench("--config", str(config), "--yes", "--out", str(out), "--max-cost", "4.3")
    doc = json.loads(out.read_text())
    excluded = [r["n"] for r in doc["trials"] if r["excluded"]]
    failed = [r["n"] for r in doc["trials"] if not r["excluded"] and not r["passed"]]
    assert excluded and failed, result.output
    sent = scripted_server.count()

    scripted_server.script("a", right)
    retry = invoke(["bench", "resume", str(out), "--retry-failed", "--yes",
                    *unsafe_unless_confined(), "--max-cost", "1000"])
    assert retry.exit_code in (0, 2), retry.output
    assert scripted_server.count() - sent == len(failed)  # the failed ones, nothing else
    merged = json.loads(out.read_text())
    assert all(r["passed"] for r in merged["trials"] if r["n"] in failed)
    assert [r["n"] for r in merged["trials"] if r["excluded"]] == excluded  # untouched
    assert "--retry-failed: a re-run replaces its failure" in retry.stdout
    sent = scripted_server.count()

    retry = invoke(["bench", "resume", str(out), "--retry-excluded", "--yes",
                    *unsafe_unless_confined(), "--max-cost", "1000"])
    assert retry.exit_code == 0, retry.output
    assert scripted_server.count() - sent == len(excluded)
    merged = json.loads(out.read_text())
    assert merged["exclusions"] == [] and len(merged["trials"]) == 8
    assert [r["planned"] for r in merged["resumes"]] == [{"failed": len(failed)},
                                                         {"excluded": len(excluded)}]


@pytest.mark.parametrize("broken", ["not json", '{"trials": []}'])
def test_resume_and_show_refuse_what_is_not_a_results_file(tmp_path, broken):
    path = tmp_path / "r.json"
    path.write_text(broken)
    for args in (["resume", str(path), "--yes"], ["show", str(path)]):
        result = invoke(["bench", *args])
        assert result.exit_code == 1 and "cannot be read as bench results" in result.output
        assert "Traceback" not in result.output


def test_sigint_mid_fanout_trial_then_resume(orch, scripted_server, orch_home, tmp_path):
    """An ensemble trial cut short by Ctrl-C (its chair on the wire) is kept, excluded and
    run again by `resume`; its wave's wave.json is final."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for member in ("a", "b"):
        scripted_server.script(member, right)
    scripted_server.script("chair", hang_on_t3)
    cases_config = write_bench(tmp_path, contestants=())
    config = tmp_path / "fan.toml"
    config.write_text(cases_config.read_text() + textwrap.dedent("""\
        [[contestants]]
        name = "fan"
        kind = "fanout"
        models = ["scripted/a", "scripted/b"]
        chair = "scripted/chair"
        tools = "none"
        """))
    out = tmp_path / "fan.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen([*ORCH, "bench", "--config", str(config), "--yes", "--out",
                                 str(out), *unsafe_unless_confined()], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not (
                    per_task(scripted_server, "chair").get("t3")
                    and err_path.read_text().count("PASS ") == 2):
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err_path.read_text()
    doc = json.loads(out.read_text())
    rows = {r["task"]: r for r in doc["trials"]}
    assert rows["t1"]["passed"] and rows["t2"]["passed"]
    assert rows["t3"]["excluded"] == "interrupted: SIGINT arrived before it was graded"
    assert "t4" not in rows
    wave = json.loads((orch_home / "runs" / f"{doc['bench_id']}-t0003" / "wave.json")
                      .read_text())
    assert wave["status"] != "running" and all(
        leg["status"] not in ("running", "pending") for leg in [*wave["legs"], wave["chair"]])

    scripted_server.script("chair", right)
    result = invoke(["bench", "resume", str(out), "--yes", *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output
    assert per_task(scripted_server, "chair") == {"t1": 1, "t2": 1, "t3": 2, "t4": 1}
    assert per_task(scripted_server, "a") == {"t1": 1, "t2": 1, "t3": 2, "t4": 1}
    doc = json.loads(out.read_text())
    assert all(r["passed"] for r in doc["trials"]) and len(doc["trials"]) == 4
