"""An error is never a pass (issue 41 item 1): a trial's `passed` comes only from a check run
on a completed answer. Before, command contestants that exited 3, hung past their limit or
printed 20 MB or binary output, and a model (or a fanout's chair, or every member)
whose provider answered HTTP 500, each scored 100 %
(`status=error passed=True`) under a check their start state already satisfied."""

from __future__ import annotations

import json
import sys
import textwrap

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

# a check the start state already satisfies: doing nothing (or failing) passes it
TASK = {"id": "keep", "task": "Leave keep.txt alone; say done.",
        "files": {"keep.txt": "here\n"}, "verify": "test -f keep.txt", "solution": "done"}


def test_errors_of_every_kind_are_failures_never_passes(orch, scripted_server, tmp_path,
                                                        monkeypatch):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script("ok", Reply(text="done"))
    scripted_server.script("down", Reply(status=500, error_message="internal"))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "keep.json").write_text(json.dumps(TASK))
    loud = tmp_path / "loud.py"
    loud.write_text("import sys\nsys.stdout.buffer.write(b'x' * (20 << 20))\n")
    binary = tmp_path / "binary.py"
    binary.write_text("import sys\nsys.stdout.buffer.write(bytes(range(256)) * 64)\n")
    (tmp_path / "bench.toml").write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "ok"
        model = "scripted/ok"
        tools = "none"

        [[contestants]]
        name = "down"
        model = "scripted/down"
        tools = "none"

        [[contestants]]
        name = "chair-down"
        kind = "fanout"
        models = ["scripted/ok", "scripted/ok"]
        chair = "scripted/down"
        tools = "none"

        [[contestants]]
        name = "members-down"
        kind = "fanout"
        models = ["scripted/down", "scripted/down"]
        tools = "none"

        [[contestants]]
        name = "exit3"
        command = "sh"
        args = ["-c", "echo done; exit 3"]
        stdin = false

        [[contestants]]
        name = "hang"
        command = "sleep"
        args = ["100"]
        stdin = false
        timeout_s = 1

        [[contestants]]
        name = "loud"
        command = "{sys.executable}"
        args = ["{loud}"]
        stdin = false

        [[contestants]]
        name = "binary"
        command = "{sys.executable}"
        args = ["{binary}"]
        stdin = false
        parse = "claude-json"
        """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--out",
                                      str(out), *unsafe_unless_confined()])
    doc = json.loads(out.read_text())
    got = {t["contestant"]: (t["status"], t["passed"], t["excluded"]) for t in doc["trials"]}
    assert got["ok"] == ("complete", True, None), result.output
    for name in ("down", "chair-down", "members-down", "exit3", "hang", "loud", "binary"):
        assert got[name][:2] == ("error", False), (name, got[name])
        assert got[name][2] is None  # counted: a failure, not an exclusion
    reasons = {t["contestant"]: t["reason"] for t in doc["trials"]}
    assert reasons["exit3"] == "exit 3"
    assert reasons["hang"] == "timeout: the command ran past its 1 s limit"
    assert reasons["loud"] == "it printed 20,971,520 bytes; orch reads at most 8,388,608"
    assert reasons["binary"] == "it printed binary output (not UTF-8 text at byte 128)"
    assert reasons["members-down"] == "no member completed"
    assert result.exit_code == 0, result.output  # failures, nothing excluded


def test_an_attempt_that_did_not_complete_holds_no_answer_to_grade():
    """The shape of the data: an answer to grade exists only for a completed attempt, and
    `passed` is derived from a check's verdict, never given."""
    import pytest

    from orchestrator.bakeoff.tasks import Verdict
    from orchestrator.bakeoff.trial import Ended, Outcome, judge

    for status in ("error", "aborted", "refused", "running", "timeout"):
        with pytest.raises(ValueError, match="no answer to grade"):
            Ended(status=status, answers=("the answer",))
    assert "passed" not in Outcome.__dataclass_fields__  # derived, not a field
    assert Outcome().passed is False  # no check ran: a failure
    assert Outcome(verdict=Verdict(True, "ok")).passed is True
    assert Outcome(excluded="x", verdict=Verdict(True, "ok")).passed is False
    assert Outcome(verdict=Verdict(True, "", "it hung")).passed is False
    from orchestrator.bakeoff.guard import Guard
    from orchestrator.bakeoff.tasks import load_task_data

    task = load_task_data({"id": "t", "task": "x", "expect": {"regex": "^"}})  # passes all
    guard = Guard(bwrap=None)
    assert judge(task, Ended(status="error", reason="exit 3"), None, guard).passed is False
    assert judge(task, Ended(status="complete", answers=("",)), None, guard).passed is True


def writes_of_passed(tree) -> list[int]:
    """Lines that write a ``passed`` key: ``x["passed"] = …``, ``.update(passed=…)``,
    ``dict(passed=…)``, ``{"passed": …}``."""
    import ast

    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) \
                    and t.slice.value == "passed":
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and any(k.arg == "passed" for k in node.keywords) \
                and isinstance(node.func, ast.Attribute | ast.Name) \
                and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "update", "dict", "setdefault"):
            lines.append(node.lineno)
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and
                                              k.value == "passed" for k in node.keys):
            lines.append(node.lineno)
    return lines


# the trial skeleton owns a trial's `passed`; the check's child replies with its verdict;
# the statistics count a contestant's passed trials (a number read from the trials)
OWNERS = {"orchestrator/bakeoff/trial.py", "orchestrator/bakeoff/child.py",
          "orchestrator/bakeoff/stats.py"}


def test_only_the_trial_skeleton_writes_a_trials_passed():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = {}
    for folder in ("orchestrator", "plugins"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            lines = writes_of_passed(ast.parse(path.read_text(encoding="utf-8")))
            if lines and rel not in OWNERS:
                found[rel] = lines
    assert found == {}, f"a trial's `passed` is written outside bakeoff/trial.py: {found}"
    # and the enumeration sees a bypass: a row passed by hand is found
    bypass = ast.parse('row["passed"] = True\nrow.update(passed=True)\nx = {"passed": 1}')
    assert writes_of_passed(bypass) == [1, 2, 3]
