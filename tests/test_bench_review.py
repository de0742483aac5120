"""The built-in `review` suite (issue 29 item 4): 12 small repositories, each with one
seeded bug introduced by a diff; the hidden check passes when the answer names the bug's
file and a line within ±3. --selftest proves every check passes its solution and fails an
empty answer; here each also fails a near miss, a wrong file and a shotgun answer; and a
scripted reviewer that finds 8 of the 12 bugs is reported as 8/12 with its interval."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.bakeoff import tasks as tasks_mod
from orchestrator.bakeoff.guard import Guard
from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

SUITE = tasks_mod.suite_dir("review")
BUGS = json.loads((SUITE / "_bugs.json").read_text())


def test_the_suite_has_twelve_kinds_of_seeded_bug_and_passes_selftest():
    loaded = tasks_mod.load_tasks(SUITE)
    assert len(loaded) == 12 and len({kind for _, _, kind in BUGS.values()}) >= 10
    for task in loaded:
        path, line, _ = BUGS[task.id]
        assert "```diff" in task.text and f"b/{path}" in task.text  # the change to review
        assert len(task.files[path].splitlines()) >= line
    result = invoke(["bench", "--selftest", "--builtin", "review", "--json",
                     *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["tasks"]
    assert len(rows) == 12 and all(r["ok"] and r["solution"] and not r["empty"] for r in rows)


@pytest.mark.parametrize("task_id", sorted(BUGS))
def test_every_check_can_fail(task_id):
    task = next(t for t in tasks_mod.load_tasks(SUITE) if t.id == task_id)
    path, line, _ = BUGS[task_id]
    guard = Guard(bwrap=None)

    def passes(answer):
        return tasks_mod.grade(task, answer, None, guard).passed

    assert passes(f"{path}:{line}: here") and passes(f"{path}:{line + 3}")
    assert passes(f"The bug is in {path.split('/')[-1]} line {max(1, line - 3)}.")
    assert not passes(f"{path}:{line + 4}")
    if line > 4:
        assert not passes(f"{path}:{line - 4}")
    assert not passes(f"other/{path.split('/')[-1]}x:{line}")  # the wrong file
    assert not passes("")
    shotgun = " ".join(f"{path}:{n}" for n in range(50, 0, -4))  # every 4th line, from the end
    assert not passes(shotgun)


def test_a_reviewer_that_finds_8_of_12_is_reported_8_of_12_with_its_interval(
        orch, scripted_server, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    found = sorted(BUGS)[:8]

    def review(body, n):
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        path = re.search(r"\+\+\+ b/(\S+)", prompt).group(1)
        task_id = next(t for t, (p, _, _) in BUGS.items() if p == path)
        line = BUGS[task_id][1] + (0 if task_id in found else 9)  # a miss: 9 lines off
        return Reply(text=f"{path}:{line}: this line is wrong.",
                     usage={"prompt_tokens": 300, "completion_tokens": 20})
    scripted_server.script("reviewer", review)
    out = tmp_path / "r.json"
    result = invoke(["bench", "--builtin", "review", "--models", "scripted/reviewer",
                     "--trials", "1", "--yes", "--out", str(out), *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    passed = {r["task"] for r in doc["trials"] if r["passed"]}
    assert passed == set(found)
    row = doc["stats"]["rows"][0]
    low, high = row["pass"]["ci"]
    assert (row["passed"], row["trials"]) == (8, 12) and low < 8 / 12 < high
    cell = f"67% (8/12) [{100 * low:.0f}%, {100 * high:.0f}%]"
    assert cell in result.stdout
    assert cell in (out.with_suffix("") / "report.md").read_text()


def test_a_council_whose_findings_hit_8_of_12_is_reported_8_of_12(orch, scripted_server,
                                                                   orch_home, tmp_path):
    """A council contestant: each trial a whole council (reviews, judging, chair) on the
    shared server; its findings, most agreed first, are what the check reads."""
    from test_council_run import judgement, kind_of

    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    found = sorted(BUGS)[:8]
    seats = ("alpha", "bravo", "charlie")
    prose = {s: f"Review by seat {s}, read closely." for s in seats}
    ranking = {s: [o for o in seats if o != s] for s in seats}

    def seat(name):
        def reply(body, n):
            kind = kind_of(body)
            if kind == "judge":
                return Reply(text=judgement(body["messages"][-1]["content"], name,
                                            votes_by={s: {"bug": "agree"} for s in seats},
                                            prose_by=prose, ranking_by=ranking))
            prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
            path = re.search(r"\+\+\+ b/(\S+)", prompt).group(1)
            task_id = next(t for t, (p, _, _) in BUGS.items() if p == path)
            line = BUGS[task_id][1] + (0 if task_id in found else 9)
            findings = [{"id": "1", "severity": "major", "location": f"{path}:{line}",
                         "claim": "a bug introduced by this change",
                         "rationale": "read the diff"}]
            return Reply(text=f"{prose[name]}\n\n```json\n{json.dumps(findings)}\n```\n",
                         usage={"prompt_tokens": 300, "completion_tokens": 40})
        return reply

    for name in seats:
        scripted_server.script(name, seat(name))
    scripted_server.script("delta", Reply(text="Fix the flagged line.\n\nVERDICT: fix-first"))
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\nbuiltin = "review"\ntrials = 1\n[[contestants]]\n'
                      'name = "council"\nkind = "council"\nmodels = ["scripted/alpha", '
                      '"scripted/bravo", "scripted/charlie"]\nchair = "scripted/delta"\n'
                      'tools = "none"\n')
    out = tmp_path / "r.json"
    result = invoke(["bench", "--config", str(config), "--yes", "--out", str(out), "-q",
                     *unsafe_unless_confined()])
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(out.read_text())
    assert {r["task"] for r in doc["trials"] if r["passed"]} == set(found)
    assert all(r["cost_usd"] and r["status"] == "complete" for r in doc["trials"])
    assert scripted_server.count("delta") == 12  # one council (one chair) per trial
    row = doc["stats"]["rows"][0]
    low, high = row["pass"]["ci"]
    cell = f"67% (8/12) [{100 * low:.0f}%, {100 * high:.0f}%]"
    assert cell in result.stdout and cell in (out.with_suffix("") / "report.md").read_text()
    # the councils are the bench's: folded under it in `orch runs`
    [entry] = json.loads(invoke(["runs", "--json"]).stdout)["runs"]
    assert entry["kind"] == "bench" and len(entry["waves"]) == 12
