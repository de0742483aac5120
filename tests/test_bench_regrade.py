"""`kill -9` of `orch bench` after a model trial was answered and billed but before its check
finished: `orch bench resume` must not pay for that trial again. Its saved answer is graded
(no request sent) with the cost the ledger holds; with the answer gone, the trial is an
excluded error saying what was billed, and only `--retry-excluded` sends it again.

The check blocks on a file the test controls, so the kill lands while the trial is graded:
the real `orch` in a subprocess, the scripted server on the wire, the real SQLite ledger.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_kill_stages import (
    IN_PRICE,
    ORCH,
    OUT_PRICE,
    answered,
    cost,
    kill,
    ledger_rows,
    settle,
    the_ledger_holds_what_was_answered,
    usage_of,
    wait_for,
)

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
PAID = cost((usage_of("solo", "bench")["prompt_tokens"],
             usage_of("solo", "bench")["completion_tokens"]))



def gated_cases(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A cases folder whose ``gate:check`` says it started grading (the first file) and then
    waits for the second to exist: the test kills the bench in between."""
    cases = tmp_path / "cases"
    cases.mkdir()
    started, go = tmp_path / "check-started", tmp_path / "go"
    (cases / "gate.py").write_text(
        "import pathlib, time\n"
        f"STARTED, GO = pathlib.Path({str(started)!r}), pathlib.Path({str(go)!r})\n"
        "def check(answer):\n"
        "    STARTED.write_text('grading')\n"
        "    while not GO.exists():\n"
        "        time.sleep(0.05)\n"
        "    return 'CODE-t1' in answer\n")
    return cases, started, go

def answering(model: str, hang: frozenset[str] = frozenset(), midway: bool = False):
    """CODE-<task>, with the usage test_kill_stages' ledger check expects of ``model``; a
    task in ``hang`` never gets an answer (``midway``: its first step, a tool call, does)."""
    def reply(body, n):
        import re

        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        task = re.search(r"Task (t\d+)", prompt).group(1)
        if task in hang and midway and not any(m["role"] == "tool" for m in body["messages"]):
            return Reply(tool_calls=[{"name": "list", "arguments": {}}],
                         usage=usage_of(model, "bench" if model == "solo" else "review"))
        if task in hang:
            return Reply(hang=True)
        return Reply(text=f"CODE-{task}",
                     usage=usage_of(model, "bench" if model == "solo" else "review"))
    return reply


SOLO = 'name = "solo"\nmodel = "scripted/solo"\ntools = "none"\n'
PAIR = 'name = "pair"\nkind = "fanout"\nmodels = ["scripted/alpha", "scripted/bravo"]\n' \
    'tools = "none"\n'


def killed_while_grading(orch, scripted_server, orch_home: Path, tmp_path: Path,
                         contestant: str = SOLO, models: tuple[str, ...] = ("solo",),
                         hang: frozenset[str] = frozenset(), verify: bool = False,
                         midway: bool = False) -> tuple[Path, str, dict, Path]:
    """Two model trials, one at a time: t0 is graded into the results file; t1's python
    check waits for ``go``, and `orch bench` is SIGKILLed once it has started (t1's answer
    billed, its leg's files written). Returns the results file, the bench id, the
    subprocess environment and the ``go`` file. ``hang``: t1 never answered (killed while
    t1 waits on the wire instead). ``verify``: t1's check is a `verify` command (it reads
    the trial folder), run with --unsafe-checks. ``midway``: t1's first step (a tool call)
    is billed, its second hangs: killed with t1's leg in flight."""
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    for model in models:
        scripted_server.script(model, answering(model, hang, midway))
    cases, started, go = gated_cases(tmp_path)
    (cases / "t0.json").write_text(json.dumps(
        {"id": "t0", "task": "Task t0: reply with CODE-t0.",
         "expect": {"contains": ["CODE-t0"]}, "solution": "CODE-t0"}))
    check = {"verify": f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; "
                       'grep -q CODE-t1 "$ORCH_BENCH_ANSWER"'} if verify else \
        {"expect": {"python": "gate:check"}}
    (cases / "t1.json").write_text(json.dumps(
        {"id": "t1", "task": "Task t1: reply with CODE-t1.", **check,
         "solution": "CODE-t1"}))
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\ncases = "cases"\ntrials = 1\njobs = 1\n'
                      'check_timeout_s = 600\n\n[[contestants]]\n' + contestant)
    out = tmp_path / "results.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    proc = subprocess.Popen([*ORCH, "bench", "--config", str(config), "--yes", "--out",
                             str(out), "-q", *(["--unsafe-checks"] if verify else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=env)
    try:
        wait_for(lambda: out.is_file() and json.loads(out.read_text())["trials"],
                 timeout=60, what="t0 graded into the results file")
        if hang:
            wait_for(lambda: scripted_server.count(models[0]) >= 2 + midway,
                     what="t1 on the wire")
            settle(orch_home, json.loads(out.read_text())["bench_id"], scripted_server,
                   list(models))
        else:
            wait_for(started.exists, timeout=60, what="t1's check to start")
        time.sleep(0.2)
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    doc = json.loads(out.read_text())
    assert [t["task"] for t in doc["trials"]] == ["t0"] and "running" in doc
    bench_id = doc["bench_id"]
    billed = 1 if hang and not midway else 2
    for model in models:  # t0 and t1 (unless t1 hung), each billed once
        assert len(answered(scripted_server, model)) == billed
    rows = ledger_rows(orch_home, "run_id = ?", bench_id)
    assert len(rows) == billed * len(models)
    assert {r["status"] for r in rows} == ({"complete", "aborted"} if midway else {"complete"})
    return out, bench_id, env, go


def resume(out: Path, env: dict, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ORCH, "bench", "resume", str(out), "--yes", "--json", *flags],
                          capture_output=True, text=True, cwd=out.parent, env=env,
                          timeout=120)


def test_a_trial_billed_before_the_kill_is_graded_from_its_saved_answer_not_sent_again(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    out, bench_id, env, go = killed_while_grading(orch, scripted_server, orch_home, tmp_path)
    go.touch()  # the check answers now
    sent = scripted_server.count("solo")
    done = resume(out, env)
    assert done.returncode == 0, done.stderr
    assert scripted_server.count("solo") == sent  # no request: t1 is not bought twice
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id, ["solo"])
    assert paid == pytest.approx(2 * PAID)
    printed = json.loads(done.stdout)
    final = json.loads(out.read_text())
    for doc in (printed, final):
        assert "running" not in doc
        t0, t1 = doc["trials"]
        assert (t1["task"], t1["passed"], t1["excluded"], t1["status"]) == \
            ("t1", True, None, "complete")
        assert t1["cost_usd"] == pytest.approx(PAID) and t1["leg_id"] == f"{bench_id}-1-2"
        assert t1["answer"] == "CODE-t1"
        assert "graded after the kill from the answer saved in" in t1["regraded"]
        assert t0["cost_usd"] + t1["cost_usd"] == pytest.approx(paid)
        assert doc["resumes"][-1]["settled"] == [2] and doc["resumes"][-1]["ran"] == 0
    assert "regraded" in done.stderr or "graded after the kill" in done.stderr
    shown = CliRunner().invoke(cli, ["bench", "show", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "PASS t1 · solo #1" in shown.output and "regraded from its saved answer" in \
        shown.output
    report = CliRunner().invoke(cli, ["bench", "report", str(out)])
    assert "Resumed (" in report.output and "1 trial(s) billed before a kill were not sent " \
        "again" in report.output, report.output
    # nothing is left to run, and asking again sends nothing either
    again = resume(out, env)
    assert again.returncode == 0 and "nothing to run" in again.stderr
    assert scripted_server.count("solo") == sent


def test_a_billed_trial_whose_answer_is_gone_is_an_error_and_not_sent_again(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    out, bench_id, env, go = killed_while_grading(orch, scripted_server, orch_home, tmp_path)
    go.touch()
    shutil.rmtree(orch_home / "runs" / f"{bench_id}-1-2")  # t1's leg folder: its answer
    sent = scripted_server.count("solo")
    done = resume(out, env)
    assert done.returncode == 2, done.stderr  # an excluded trial
    assert scripted_server.count("solo") == sent
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id, ["solo"])
    final = json.loads(out.read_text())
    t1 = final["trials"][1]
    assert (t1["task"], t1["status"], t1["passed"]) == ("t1", "error", False)
    assert t1["cost_usd"] == pytest.approx(PAID) and paid == pytest.approx(2 * PAID)
    assert t1["excluded"] == (f"billed ${PAID:.4f} before the kill; answer not saved (its "
                              f"leg folder {bench_id}-1-2 is gone): not sent again")
    assert t1["excluded"] in done.stderr
    shown = CliRunner().invoke(cli, ["bench", "show", str(out)])
    assert f"EXCL t1 · solo #1 · 0.0s · 0 steps ({t1['excluded']})" in shown.output

    # a plain resume leaves it as it is; only --retry-excluded pays for it again
    again = resume(out, env)
    assert again.returncode == 0 and "nothing to run" in again.stderr
    assert scripted_server.count("solo") == sent
    retried = resume(out, env, "--retry-excluded")
    assert retried.returncode == 0, retried.stderr
    resent = scripted_server.requests_for("solo")[sent:]
    assert len(resent) == 1 and "Task t1" in json.dumps(resent[0].body)
    t1 = json.loads(out.read_text())["trials"][1]
    assert (t1["passed"], t1["excluded"], t1.get("regraded")) == (True, None, None)


def test_a_fanout_trial_billed_before_the_kill_is_graded_from_its_saved_answers(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    models = ("alpha", "bravo")
    out, bench_id, env, go = killed_while_grading(orch, scripted_server, orch_home, tmp_path,
                                                  PAIR, models)
    go.touch()
    sent = sum(scripted_server.count(m) for m in models)
    done = resume(out, env)
    assert done.returncode == 0, done.stderr
    assert sum(scripted_server.count(m) for m in models) == sent
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id,
                                              list(models))
    t0, t1 = json.loads(out.read_text())["trials"]
    assert (t1["task"], t1["passed"], t1["excluded"]) == ("t1", True, None)
    assert t1["cost_usd"] == pytest.approx(paid / 2) and t1["wave_id"] == f"{bench_id}-t0002"
    assert t0["cost_usd"] + t1["cost_usd"] == pytest.approx(paid)
    assert f"answers saved in {bench_id}-t0002" in t1["regraded"]


def test_a_resume_killed_while_grading_is_settled_by_the_next_from_its_own_waves(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """The first run is killed while t1 waits on the wire (it may be billed: the resume says
    so and does not send it); ``--retry-excluded`` sends t1 (its wave ``r2-1``, where t1 is
    leg 1, not 2) and is killed while t1 is graded; the next resume grades t1 from that
    saved answer and sends nothing."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    out, bench_id, env, go = killed_while_grading(orch, scripted_server, orch_home, tmp_path,
                                                  hang=frozenset({"t1"}))
    scripted_server.script("solo", answering("solo"))
    # t1's request was in flight at the kill: it may be billed, so a resume does not send it
    # again by itself; it says so, and --retry-excluded sends it
    sent = scripted_server.count("solo")
    settled = resume(out, env)
    assert settled.returncode == 2 and scripted_server.count("solo") == sent
    assert "in flight at the kill: may be billed" in \
        json.loads(out.read_text())["trials"][1]["excluded"]
    again = subprocess.Popen([*ORCH, "bench", "resume", str(out), "--yes", "-q",
                              "--retry-excluded"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path, env=env)
    try:
        wait_for((tmp_path / "check-started").exists, timeout=60, what="t1's check")
        time.sleep(0.2)
        kill(again)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate()
    marker = json.loads(out.read_text())["running"]
    assert (marker["wave_prefix"], marker["trials"]) == ("r2-", [2])
    assert [(r["leg_id"], r["status"]) for r in ledger_rows(orch_home, "run_id = ?", bench_id)
            if r["wave_id"] == f"{bench_id}-r2-1"] == [(f"{bench_id}-r2-1-1", "complete")]
    go.touch()
    sent = scripted_server.count("solo")
    done = resume(out, env)
    assert done.returncode == 0, done.stderr
    assert scripted_server.count("solo") == sent
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id, ["solo"])
    t0, t1 = json.loads(out.read_text())["trials"]
    assert (t1["task"], t1["passed"], t1["leg_id"]) == ("t1", True, f"{bench_id}-r2-1-1")
    assert t1["cost_usd"] == pytest.approx(PAID) and paid == pytest.approx(2 * PAID)


def test_a_billed_trial_whose_check_needs_the_gone_trial_folder_is_an_error_not_resent(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """A `verify` check reads the files the model left in its trial folder; that folder
    is not kept, so the saved answer alone cannot be graded fairly: excluded, not resent."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    out, bench_id, env, go = killed_while_grading(orch, scripted_server, orch_home, tmp_path,
                                                  verify=True)
    go.touch()
    sent = scripted_server.count("solo")
    done = resume(out, env, "--unsafe-checks")
    assert done.returncode == 2, done.stderr
    assert scripted_server.count("solo") == sent
    t1 = json.loads(out.read_text())["trials"][1]
    assert (t1["status"], t1["cost_usd"]) == ("error", pytest.approx(PAID))
    assert t1["excluded"] == (f"billed ${PAID:.4f} before the kill; its check needs the "
                              "trial folder, which is gone: not sent again")


def test_a_trial_killed_in_flight_after_a_billed_step_is_an_error_not_resent(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """t1 used a tool (that step billed, its row in flight) and was waiting for its next
    answer when the kill came: no answer to grade, and its first step is not bought again."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    out, bench_id, env, go = killed_while_grading(
        orch, scripted_server, orch_home, tmp_path,
        SOLO.replace('tools = "none"', 'tools = "read"'), hang=frozenset({"t1"}), midway=True)
    sent = scripted_server.count("solo")
    done = resume(out, env)
    assert done.returncode == 2, done.stderr
    assert scripted_server.count("solo") == sent
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id, ["solo"])
    t1 = json.loads(out.read_text())["trials"][1]
    assert (t1["status"], t1["cost_usd"]) == ("error", pytest.approx(PAID))
    assert paid == pytest.approx(2 * PAID)
    # its next request was in flight at the kill: it may be billed too (the request journal)
    assert re.fullmatch(rf"billed \${PAID:.4f} before the kill; 1 request\(s\) in flight at "
                        r"the kill: may be billed, at most \$\d+\.\d{4}: not sent again",
                        t1["excluded"]), t1["excluded"]
    assert t1["in_flight_at_kill"]["requests"] == 1


def test_a_first_trial_billed_before_the_kill_is_resumable_and_graded_not_sent_again(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """The kill comes while the bench's only trial is graded: no trial was saved yet, but
    the results file was written before the first request, so the resume finds the trial
    in the ledger and grades its saved answer."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    scripted_server.script("solo", answering("solo"))
    cases, started, go = gated_cases(tmp_path)
    (cases / "t1.json").write_text(json.dumps(
        {"id": "t1", "task": "Task t1: reply with CODE-t1.",
         "expect": {"python": "gate:check"}, "solution": "CODE-t1"}))
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\ncases = "cases"\ntrials = 1\njobs = 1\n'
                      'check_timeout_s = 600\n\n[[contestants]]\n' + SOLO)
    out = tmp_path / "results.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    proc = subprocess.Popen([*ORCH, "bench", "--config", str(config), "--yes", "--out",
                             str(out), "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        wait_for(started.exists, timeout=60, what="t1's check to start")
        time.sleep(0.2)
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    doc = json.loads(out.read_text())
    assert doc["trials"] == [] and doc["running"]["wave_prefix"] == ""
    go.touch()
    sent = scripted_server.count("solo")
    done = resume(out, env)
    assert done.returncode == 0, done.stderr
    assert scripted_server.count("solo") == sent == 1
    final = json.loads(out.read_text())
    (t1,) = final["trials"]
    assert (t1["passed"], t1["status"], t1["cost_usd"]) == (True, "complete",
                                                             pytest.approx(PAID))
    assert t1["regraded"] and t1["leg_id"] == f"{final['bench_id']}-1-1"
    assert the_ledger_holds_what_was_answered(scripted_server, orch_home, final["bench_id"],
                                              ["solo"]) == pytest.approx(PAID)
