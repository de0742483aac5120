"""`orch bench` before and around the spend: --init, --selftest, --dry-run, --check, --probe,
the confirmation rules, --max-cost over the whole bench, and bad input."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest
from click.testing import CliRunner

from orchestrator.bakeoff import tasks as tasks_mod
from orchestrator.cli import cli
from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply


def bench(*args, input=None):
    """``orch bench ARGS``: in-process, or through a warm daemon (the ``both_ways`` param)."""
    return invoke(["bench", *unsafe_unless_confined(), *args], input=input)


both_ways = pytest.mark.usefixtures("both_ways")  # every assertion holds both ways


def test_selftest_over_every_builtin_suite():
    result = bench("--selftest", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    suites = {}
    for row in doc["tasks"]:
        assert row["ok"] and row["solution"] and not row["empty"], row
        suites[row["suite"]] = suites.get(row["suite"], 0) + 1
    assert suites["builtin:reading"] >= 13
    assert suites["builtin:format"] >= 5
    assert suites["builtin:adversarial"] >= 5
    format_tasks = tasks_mod.load_tasks(tasks_mod.suite_dir("format"))
    assert all("json_schema" in t.expect for t in format_tasks)


def test_selftest_reports_a_check_that_cannot_fail(tmp_path):
    (tmp_path / "weak.toml").write_text('id = "weak"\ntask = "x"\nsolution = "y"\n'
                                        'verify = "true"\n')
    (tmp_path / "wrong.toml").write_text('id = "wrong"\ntask = "x"\nsolution = "no"\n'
                                         '[expect]\nequals = "yes"\n')
    result = bench("--selftest", "--cases", str(tmp_path))
    assert result.exit_code == 1
    assert "weak: the check cannot fail" in result.stdout
    assert "wrong: the solution fails its own check" in result.stdout


def test_init_writes_a_starter_and_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert bench("--init").exit_code == 0
    text = (tmp_path / "bench.toml").read_text()
    assert "[[contestants]]" in text
    again = bench("--init")
    assert again.exit_code == 2 and "already exists" in again.output
    assert (tmp_path / "bench.toml").read_text() == text


def test_dry_run_costs_nothing_and_shows_the_plan(orch, scripted_server, tmp_path):
    orch.provider()  # no prices declared: the estimate names it
    config = tmp_path / "bench.toml"
    config.write_text(f"""
[bench]
builtin = "reading"
trials = 2
[[contestants]]
name = "a"
model = "scripted/a"
[[contestants]]
name = "agent"
kind = "command"
command = "{sys.executable}"
args = ["-c", "print(1)", "--cwd", "{{cwd}}", "--task", "{{task}}"]
stdin = false
""")
    result = bench("--config", str(config), "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "14 tasks (builtin:reading) × 2 contestants × 2 trials = 56 trials" in out
    assert "In this code base, how many distinct items" in out  # the first prompt
    assert f"agent: {sys.executable} -c 'print(1)' --cwd '<trial folder>' --task" in out
    assert "a: model scripted/a" in out
    assert "a (scripted/a: no known price)" in out and "agent (a command" in out
    from orchestrator.sandbox import bwrap  # a command contestant: where it will run

    assert ("checks and command contestants: confined under bubblewrap" in out) is \
        (bwrap.usable() is None)
    assert scripted_server.count() == 0


def test_check_says_found_or_missing_and_calls_no_model(orch, scripted_server, tmp_path,
                                                        monkeypatch):
    orch.provider(api_key_env="BENCH_TEST_KEY")
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    config = tmp_path / "bench.toml"
    config.write_text("""
[bench]
builtin = "format"
[[contestants]]
name = "m"
model = "scripted/m"
[[contestants]]
name = "ghost"
kind = "command"
command = "no-such-agent-cli-xyz"
""")
    result = bench("--config", str(config), "--check")
    assert result.exit_code == 1
    assert "m: missing" in result.stdout and "BENCH_TEST_KEY" in result.stdout
    assert "ghost: missing" in result.stdout
    monkeypatch.setenv("BENCH_TEST_KEY", "sk-test-value-123456")
    result = bench("--config", str(config), "--check")
    assert "m: found" in result.stdout and "sk-test-value" not in result.output
    assert scripted_server.count() == 0


@both_ways
@pytest.mark.refused_before_the_daemon
def test_without_a_terminal_yes_or_max_cost_is_required(orch, scripted_server):
    orch.provider()
    result = bench("--builtin", "format", "--models", "scripted/a", "--trials", "1")
    assert result.exit_code == 2 and "--yes" in result.output
    assert scripted_server.count() == 0


@both_ways
@pytest.mark.refused_before_the_daemon
def test_duplicate_and_bad_input_is_one_line(orch, tmp_path):
    orch.provider()
    dup = bench("--builtin", "format", "--models", "scripted/a,scripted/a", "--yes")
    assert dup.exit_code == 1 and "used twice" in dup.output and "Traceback" not in dup.output
    only = bench("--builtin", "format", "--models", "scripted/a", "--only", "nope", "--yes")
    assert only.exit_code == 1 and "unknown task(s) nope" in only.output
    (tmp_path / "bad.toml").write_text("id = [")
    bad = bench("--cases", str(tmp_path), "--models", "scripted/a", "--yes")
    assert bad.exit_code == 1 and "cannot be read" in bad.output
    (tmp_path / "bad.toml").write_text('id = "x"\ntask = "t"\n[files]\n"../escape" = "x"\n'
                                       '[expect]\nequals = "y"\n')
    esc = bench("--cases", str(tmp_path), "--models", "scripted/a", "--yes")
    assert esc.exit_code == 1 and "must be relative" in esc.output
    none = bench("--models", "scripted/a", "--yes")
    assert none.exit_code == 1 and "no tasks" in none.output
    missing = bench("report", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "does not exist" in missing.output


@both_ways
def test_max_cost_bounds_the_whole_bench(orch, scripted_server, orch_home):
    # dear enough that one trial's allowance (~4k output tokens) is most of the ceiling
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("a", Reply(text="{}", usage={"prompt_tokens": 100,
                                                         "completion_tokens": 10}))
    result = bench("--builtin", "format", "--models", "scripted/a", "--trials", "3",
                   "--jobs", "1", "--max-cost", "5", "--json")  # no --yes: the ceiling bounds it
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    ran = [t for t in doc["trials"] if not t["excluded"]]
    refused = [t for t in doc["trials"] if t["excluded"]]
    assert ran and refused and len(ran) + len(refused) == 15
    assert all("COST_CEILING" in t["excluded"] for t in refused)
    assert scripted_server.count() == len(ran)  # a refused trial sent nothing
    con = sqlite3.connect(orch_home / "ledger.db")
    spent = con.execute("select sum(cost_usd) from spend where run_id = ?",
                        (doc["bench_id"],)).fetchone()[0]
    assert spent <= 5.0
    assert "excluded" in CliRunner().invoke(cli, ["bench", "report", doc["results_file"]
                                                  if "results_file" in doc else
                                                  str(orch_home / "bench" /
                                                      f"{doc['bench_id']}.json")]).stdout


@both_ways
def test_probe_runs_one_tiny_task_per_contestant(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("good", Reply(text="PONG", usage={"prompt_tokens": 20,
                                                             "completion_tokens": 1}))
    scripted_server.script("bad", Reply(status=500))
    result = bench("--builtin", "format", "--models", "scripted/good,scripted/bad",
                   "--probe", "--yes")
    assert result.exit_code == 1, result.output  # one contestant did not pass the probe
    assert "scripted/good: started; grading PASS" in result.stdout
    assert "tokens/cost read" in result.stdout
    assert "scripted/bad: did not finish; grading FAIL" in result.stdout
    assert scripted_server.count("good") == 1


@both_ways
def test_models_shortcut_prints_live_lines_and_tables(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text='{"year": 2026, "month": 11, "day": 30}'))
    scripted_server.script("b", Reply(text="no"))
    result = bench("--builtin", "format", "--only", "format-03-date", "--models",
                   "scripted/a,scripted/b", "--trials", "2", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("PASS format-03-date · scripted/a") == 2
    assert result.stderr.count("FAIL format-03-date · scripted/b") == 2
    assert "vs scripted/a:" in result.stdout and "inconclusive" in result.stdout
    assert "Warning: only 2 trial(s) per task" in result.stdout


def test_report_without_the_extra_says_how_to_get_charts(monkeypatch, tmp_path):
    from orchestrator.bakeoff import charts, report

    monkeypatch.setattr(charts, "available", lambda: False)
    doc = {"bench_id": "b", "settings": {"source": "x", "tasks": ["t"], "trials": 1,
                                         "timeout_s": 1, "prompt_sha256": "0",
                                         "contestants": [{"name": "a", "kind": "model",
                                                          "model": "m"}]},
           "trials": [{"contestant": "a", "task": "t", "passed": True}], "exclusions": []}
    from orchestrator.bakeoff.stats import analyse

    doc["stats"] = analyse(doc["trials"], ["a"], ["t"], resamples=100)
    md, page = report.write(doc, tmp_path / "r")
    assert "pip install 'orch[report]'" in page.read_text()
    assert "pip install 'orch[report]'" in md.read_text()
    assert "<svg" not in page.read_text()


@pytest.mark.parametrize("parser,stdout,answer,tokens,cost", [
    ("claude-json", json.dumps({"type": "result", "result": "done", "total_cost_usd": 0.02,
                                "num_turns": 3, "usage": {"input_tokens": 10,
                                                          "cache_read_input_tokens": 90,
                                                          "output_tokens": 5}}),
     "done", (100, 5, 90), 0.02),
    ("codex-jsonl", "\n".join(json.dumps(e) for e in [
        {"type": "thread.started"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "fixed it"}},
        {"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 20,
                                             "output_tokens": 7}}]) + "\nnot json\n",
     "fixed it", (50, 7, 20), None),
    ("orch-json", json.dumps({"legs": [{"status": "error", "answer": ""},
                                       {"status": "complete", "answer": "hi", "steps": 2}],
                              "usage": {"input_tokens": 3, "output_tokens": 4,
                                        "cached_tokens": 0}, "cost_usd": 0.5}),
     "hi", (3, 4, 0), 0.5),
    ("none", "plain answer", "plain answer", (0, 0, 0), None),
])
def test_output_parsers(parser, stdout, answer, tokens, cost):
    from orchestrator.bakeoff.contestants import parse_output
    from orchestrator.bakeoff.guard import Guard

    got = parse_output(parser, stdout, Guard(bwrap=None))
    assert got.answer == answer
    assert (got.input_tokens, got.output_tokens, got.cached_tokens) == tokens
    assert got.cost_usd == cost


def test_a_command_that_reports_cost_is_in_the_ledger_as_reported(ledger_url, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text("import json; print(json.dumps({'result': 'PONG', 'total_cost_usd': 0.25,"
                     " 'usage': {'input_tokens': 7, 'output_tokens': 3}}))")
    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(30)")
    config = tmp_path / "bench.toml"
    config.write_text(f"""
[[contestants]]
name = "claude-like"
kind = "command"
command = "{sys.executable}"
args = ["{agent}"]
parse = "claude-json"
[[contestants]]
name = "sleeper"
kind = "command"
command = "{sys.executable}"
args = ["{slow}"]
timeout_s = 0.5
""")
    result = bench("--config", str(config), "--builtin", "format", "--probe", "--yes",
                   "--json")
    assert result.exit_code == 1, result.output  # the sleeper timed out
    doc = json.loads(result.stdout)
    claude, sleeper = doc["trials"]
    assert claude["passed"] and claude["cost_source"] == "reported"
    assert "timeout" in sleeper["reason"] and not sleeper["passed"]
    from orchestrator.ledger.spend import Ledger  # SQLite or PostgreSQL: ledger_url runs both

    rows = [(r["kind"], r["model"], r["cost_usd"], r["cost_source"], r["run_id"],
             r["input_tokens"]) for r in Ledger().rows()]
    assert rows == [("bench", "command/claude-like", 0.25, "reported", doc["bench_id"], 7)]
