"""A hostile check or contestant never stops `orch bench`: a `python` check that hangs, calls
sys.exit or dies, a claude-json contestant that prints nothing, one that prints 300 MB and
`yes`. The bench completes, each trial says why, the results file is written and the model
trials already paid for are kept. Before: a hang froze the bench for good, sys.exit(0) ended
it with exit 0 and no results, an empty claude-json was an internal error, and 300 MB of
output made a 300 MB results file marked `complete`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

CHECKS = """\
import os, pathlib, sys, time

def hang(answer):
    if MARK:  # the check's environment is scrubbed: no variable can carry this
        pathlib.Path(MARK).touch()
    time.sleep(10**6)

def leave(answer):
    sys.exit(0)

def die(answer):
    os._exit(3)

def loud(answer):
    print("not a verdict " * 1000)
    return "PONG" in answer
"""


def write_tasks(folder, timeout=1.0, mark=None):
    folder.mkdir()
    (folder / "checks_hostile.py").write_text(f"MARK = {str(mark or '')!r}\n" + CHECKS)
    for name in ("hang", "leave", "die", "loud"):
        # only the hanging check needs a short limit; the others end by themselves, and a
        # loaded machine can take more than a second to start a python child
        limit = timeout if name == "hang" else max(timeout, 60)
        (folder / f"{name}.toml").write_text(textwrap.dedent(f"""\
            id = "{name}"
            task = "Say PONG."
            check_timeout_s = {limit}
            [expect]
            python = "checks_hostile:{name}"
            """))


def test_checks_that_hang_exit_or_die_exclude_their_trial_not_the_bench(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("m", Reply(text="PONG", usage={"prompt_tokens": 10,
                                                          "completion_tokens": 2}))
    write_tasks(tmp_path / "cases")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results.json"
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["bench", "--cases", "cases", "--models", "scripted/m",
                                      "--trials", "1", "--yes", "--out", str(out), "--json"])
    assert result.exit_code == 2, result.output  # 2: trials were excluded
    assert time.monotonic() - started < 120  # the hanging check held nothing up for long
    doc = json.loads(out.read_text())
    why = {t["task"]: (t["passed"], t["excluded"]) for t in doc["trials"]}
    assert why == {
        "die": (False, "the check could not grade it: it exited (code 3) without a verdict"),
        "hang": (False, "the check could not grade it: it ran past its 1 s limit"),
        "leave": (False, "the check could not grade it: it called sys.exit(0)"),
        "loud": (True, None)}  # what a check prints is not taken for its verdict
    assert len(doc["exclusions"]) == 3
    # the model trials were paid for: every one is in the ledger
    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select status from spend where run_id = ?", (doc["bench_id"],)).fetchall()
    assert rows == [("complete",)] * 4


def test_selftest_names_a_check_that_exits_instead_of_exiting_with_it(tmp_path):
    write_tasks(tmp_path / "cases", timeout=1)
    for name in ("hang", "leave", "die", "loud"):
        path = tmp_path / "cases" / f"{name}.toml"
        path.write_text(path.read_text().replace('task = "Say PONG."',
                                                 'task = "Say PONG."\nsolution = "PONG"'))
    result = CliRunner().invoke(cli, ["bench", "--selftest", "--cases",
                                      str(tmp_path / "cases")])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("BAD ") and "leave" in line and "sys.exit(0)" in line
               for line in lines), result.output
    assert any("hang" in line and "ran past its 1 s limit" in line for line in lines)
    assert any(line.startswith("ok ") and "loud" in line for line in lines)
    assert lines[-1] == "1/4 checks pass their solution and fail an empty answer"


def test_contestants_that_print_nothing_or_too_much(orch, scripted_server, orch_home,
                                                    tmp_path, monkeypatch):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("m", Reply(text="PONG", usage={"prompt_tokens": 10,
                                                          "completion_tokens": 2}))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t.toml").write_text('id = "t"\ntask = "Say PONG."\n[expect]\ncontains = "PONG"\n')
    huge = tmp_path / "huge.py"
    huge.write_text("import sys\nchunk = b'PONG' * (1 << 18)\n"
                    "for _ in range(300):\n    sys.stdout.buffer.write(chunk)\n")
    (tmp_path / "bench.toml").write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "model"
        model = "scripted/m"
        tools = "none"

        [[contestants]]
        name = "logged-out"
        kind = "command"
        command = "true"
        parse = "claude-json"

        [[contestants]]
        name = "huge"
        kind = "command"
        command = "{sys.executable}"
        args = ["{huge}"]
        stdin = false

        [[contestants]]
        name = "yes"
        kind = "command"
        command = "yes"
        stdin = false
        timeout_s = 2
        """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--out",
                                      str(out), *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output  # failures, none excluded
    assert "Traceback" not in result.output and "internal error" not in result.output
    doc = json.loads(out.read_text())
    t = {r["contestant"]: r for r in doc["trials"]}
    assert t["model"]["passed"] and t["model"]["status"] == "complete"
    assert t["logged-out"]["status"] == "error" and t["logged-out"]["reason"] == (
        "its output could not be read as claude-json: ValueError: empty output (is the CLI "
        "installed and logged in?)")
    assert not t["logged-out"]["passed"] and t["logged-out"]["excluded"] is None  # counted
    assert t["huge"]["status"] == "error" and not t["huge"]["passed"]
    assert t["huge"]["reason"] == "it printed 314,572,800 bytes; orch reads at most 8,388,608"
    assert t["huge"]["stdout_bytes"] == 300 << 20
    assert "cut by orch: 314,572,800 bytes in all, 20,000 characters kept" in t["huge"]["stdout"]
    assert t["yes"]["status"] == "error" and not t["yes"]["passed"]  # not "complete"
    assert t["yes"]["reason"] == "timeout: the command ran past its 2 s limit"
    assert t["yes"]["stdout_bytes"] > 8 << 20  # it went on printing; orch went on reading
    assert out.stat().st_size < 200_000  # what is kept is capped
    assert doc["exclusions"] == []
    assert (tmp_path / "results").is_dir()  # report.md and report.html too


@pytest.mark.slow
def test_sigterm_during_a_hanging_check_leaves_promptly_with_the_partial_results(
        orch, scripted_server, orch_home, tmp_path):
    orch.provider()
    scripted_server.script("m", Reply(text="PONG"))
    mark = tmp_path / "hanging"
    write_tasks(tmp_path / "cases", timeout=600, mark=mark)
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    out = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "bench", "--cases",
                             str(tmp_path / "cases"), "--models", "scripted/m", "--trials",
                             "1", "--jobs", "1", "--yes", "--out", str(out)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate(timeout=5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    # the check would hang for 600 s; orch leaves in about a second (1.2 s measured, most of
    # it writing the report), given room here for a loaded machine
    assert took < 15.0, took
    doc = json.loads(out.read_text())
    hang = next(t for t in doc["trials"] if t["task"] == "hang")
    assert hang["excluded"] == "interrupted: SIGTERM arrived before it was graded"
    assert doc["interrupted"]["signal_name"] == "SIGTERM"


def test_selftest_takes_the_check_limit_from_the_bench_file(tmp_path):
    write_tasks(tmp_path / "cases", timeout=1)
    hang = tmp_path / "cases" / "hang.toml"
    hang.write_text(hang.read_text().replace("check_timeout_s = 1\n", ""))  # the bench's
    for name in ("leave", "die", "loud"):
        (tmp_path / "cases" / f"{name}.toml").unlink()
    (tmp_path / "bench.toml").write_text('[bench]\ncases = "cases"\ncheck_timeout_s = 0.5\n')
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["bench", "--selftest", "--config",
                                      str(tmp_path / "bench.toml")])
    assert result.exit_code == 1 and "ran past its 0.5 s limit" in result.output, result.output
    assert time.monotonic() - started < 30  # not the 60 s default, twice
