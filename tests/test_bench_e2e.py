"""`orch bench` end to end: the real CLI, real HTTP to the scripted server, a real ledger,
contestants of known behaviour, and a command contestant that edits a file."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows

from orchestrator.cli import cli
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

TASKS = [f"t{i}" for i in range(1, 9)]

AGENT = """\
import pathlib, re, sys
prompt = sys.stdin.read()
code = re.search(r"CODE-t[0-9]+", prompt).group(0)
pathlib.Path("fixed.txt").write_text(code + "\\n")
"""


def write_cases(folder):
    folder.mkdir()
    for i, task in enumerate(TASKS):
        text = f"Task {task}: reply with the code CODE-{task} or write it into fixed.txt."
        check = f'grep -q "CODE-{task}" "$ORCH_BENCH_ANSWER" || grep -q "CODE-{task}" fixed.txt'
        if i % 2:  # both file formats
            (folder / f"{task}.json").write_text(json.dumps(
                {"id": task, "task": text, "verify": check, "solution": f"CODE-{task}",
                 "files": {"fixed.txt": "broken\n"}}))
        else:
            (folder / f"{task}.toml").write_text(textwrap.dedent(f"""\
                id = "{task}"
                task = "{text}"
                verify = '{check}'
                solution = "CODE-{task}"
                [files]
                "fixed.txt" = "broken\\n"
                """))
    # a task whose start state cannot be written (a file where a folder must go): excluded
    (folder / "t9-broken.json").write_text(json.dumps(
        {"id": "t9", "task": "Task t9: CODE-t9", "verify": "true",
         "files": {"a": "file", "a/b": "needs a as a folder"}}))


def answer(right_on):
    def reply(body, n):
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        task = re.search(r"Task (t\d+)", prompt).group(1)
        text = f"The code is CODE-{task}." if task in right_on else "I do not know."
        return Reply(text=text, usage={"prompt_tokens": 100, "completion_tokens": 10})
    return reply


def write_config(tmp_path, agent):
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 2
        jobs = 16

        [[contestants]]
        name = "right"
        model = "scripted/right"

        [[contestants]]
        name = "half"
        model = "scripted/half"

        [[contestants]]
        name = "never"
        model = "scripted/never"
        tools = "none"

        [[contestants]]
        name = "slow"
        model = "scripted/slow"

        [[contestants]]
        name = "script"
        kind = "command"
        command = "{sys.executable}"
        args = ["{agent}", "{{cwd}}"]
        timeout_s = 60
        """))
    return config


@pytest.fixture
def bench_setup(orch, scripted_server, tmp_path, monkeypatch):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("right", answer(set(TASKS)))
    scripted_server.script("half", answer({"t1", "t2", "t3", "t4"}))
    scripted_server.script("never", answer(set()))
    scripted_server.script("slow", Reply(hang=True))
    write_cases(tmp_path / "cases")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    return write_config(tmp_path, agent)


def test_a_bake_off_of_known_contestants(bench_setup, orch_home, scripted_server):
    result = CliRunner().invoke(cli, ["bench", "--config", str(bench_setup), "--yes",
                                      "--timeout", "2", "--json", *unsafe_unless_confined()])
    assert result.exit_code == 2, result.output  # 2: trials were excluded
    doc = json.loads(result.stdout)
    bench_id = doc["bench_id"]
    stats = doc["stats"]

    rates = {r["contestant"]: r["pass"]["value"] for r in stats["rows"]}
    assert list(rates) == ["right", "half", "never", "slow", "script"]
    assert rates == {"right": 1.0, "half": 0.5, "never": 0.0, "slow": 0.0, "script": 1.0}
    verdicts = {c["contestant"]: (c["verdict"], c["wins"], c["losses"], c["ties"])
                for c in stats["comparisons"]}
    assert verdicts == {"half": ("inconclusive", 0, 4, 4), "never": ("worse", 0, 8, 0),
                        "slow": ("worse", 0, 8, 0), "script": ("inconclusive", 0, 0, 8)}

    # the order is task -> contestant -> trial; t9's set-up failed for everyone: excluded
    order = [(t["task"], t["contestant"], t["trial"]) for t in doc["trials"]]
    assert order[:3] == [("t1", "right", 1), ("t1", "right", 2), ("t1", "half", 1)]
    assert len(doc["trials"]) == 9 * 5 * 2
    assert {(e["task"], e["reason"].split(":")[0]) for e in doc["exclusions"]} == \
        {("t9", "set-up failed")}
    assert len(doc["exclusions"]) == 10

    slow = [t for t in doc["trials"] if t["contestant"] == "slow" and not t["excluded"]]
    assert all(not t["passed"] and "timeout" in (t["reason"] or "").lower() for t in slow), \
        [(t["reason"], t["status"]) for t in slow]
    script = [t for t in doc["trials"] if t["contestant"] == "script" and not t["excluded"]]
    assert all(t["passed"] and t["answer"] == "" for t in script)  # the file edit passed
    assert script[0]["command"].startswith(sys.executable)
    assert script[0]["check_output"].startswith("exit 0")
    half_t5 = next(t for t in doc["trials"] if t["contestant"] == "half" and t["task"] == "t5")
    assert not half_t5["passed"] and half_t5["check_output"].startswith("exit 1")

    # one ledger row per model trial, with the bench's run_id and kind bench
    rows = ledger_rows(orch_home)
    model_trials = [t for t in doc["trials"] if t["kind"] == "model"]
    assert len(rows) == len(model_trials) == 9 * 4 * 2  # excluded ones too, as refused
    assert {r["status"] for r in rows if r["leg_id"] in
            {t["leg_id"] for t in model_trials if t["excluded"]}} == {"refused"}
    assert {r["run_id"] for r in rows} == {bench_id}
    assert {r["kind"] for r in rows} == {"bench"}
    assert sorted(r["leg_id"] for r in rows) == sorted(t["leg_id"] for t in model_trials)
    right_rows = [r for r in rows if r["model"] == "scripted/right" and r["status"] == "complete"]
    assert len(right_rows) == 16
    assert all(r["cost_usd"] == pytest.approx((100 + 20) / 1e6) for r in right_rows)
    # "never" has tools off: its requests offered none; "right" read with tools on
    never_bodies = [r.body for r in scripted_server.requests_for("never")]
    assert never_bodies and all(not b.get("tools") for b in never_bodies)
    assert all(b.get("tools") for b in (r.body for r in scripted_server.requests_for("right")))

    # the results file and the report
    saved = json.loads((orch_home / "bench" / f"{bench_id}.json").read_text())
    assert saved["trials"] == doc["trials"] and saved["settings"]["trials"] == 2
    md = (orch_home / "bench" / bench_id / "report.md").read_text()
    assert "vs right" in md and "| never |" in md and "worse" in md and "t9" in md
    page = (orch_home / "bench" / bench_id / "report.html").read_text()
    assert page.count("<svg") == 3 and "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # self-contained

    # report FILE re-renders the same numbers
    again = CliRunner().invoke(cli, ["bench", "report", str(orch_home / "bench" /
                                                          f"{bench_id}.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["comparisons"] == stats["comparisons"]
    text = CliRunner().invoke(cli, ["bench", "report", str(orch_home / "bench" /
                                                         f"{bench_id}.json")])
    assert "variant" in text.stdout and "Δ pass [95% CI]" in text.stdout
    assert "only pass-rate differences above ~" in text.stdout
