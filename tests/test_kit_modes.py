"""The testing kit covers every mode (issue 44 item 4): a council, a deliberation and a bench
trial run in-process through the app's own prepare/start with only the plugins a test chose,
the scripted seats and deliberators are read by orch as a real model's replies, and
orchestrator.modes says where a hook runs with the core's own readers. Every public name of
the kit is documented in docs/ and used by an example."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from orchestrator import modes
from orchestrator.hookspecs import hookimpl
from orchestrator.testing import bench_kit, council_kit, deliberation_kit
from orchestrator.testing.council_kit import council_chair, council_seat, finding
from orchestrator.testing.deliberation_kit import deliberator
from orchestrator.testing.kit import OrchKit

ROOT = Path(__file__).resolve().parents[1]
MARK = "kit-mark: this request passed the test's plugin"


class Marker:
    """A test plugin: a system prompt on every leg, and where each leg ran, on its record."""

    NAME = "marker"

    @hookimpl
    def system_prompt(self, leg):
        return MARK

    @hookimpl
    def leg_start(self, leg):
        leg.set("where", {"stage": modes.council_stage(leg), "run": modes.council_run(leg),
                          "round": modes.deliberation_round(leg),
                          "bench": modes.bench_trial(leg)})


def public_names() -> dict[str, object]:
    """The kit's public names: OrchKit's methods, the mode modules' ``__all__``, the
    plugin-side ``orchestrator.modes``."""
    names = {n: f for n, f in inspect.getmembers(OrchKit, inspect.isfunction)
             if not n.startswith("_")}
    for module in (council_kit, deliberation_kit, bench_kit, modes):
        names.update({n: getattr(module, n) for n in module.__all__})
    return names


def test_every_public_name_of_the_kit_is_documented_and_used_by_an_example():
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    examples = "\n".join(p.read_text() for p in (ROOT / "examples").rglob("*.py"))
    names = public_names()
    assert {"run_council", "run_deliberation", "run_trial", "run_bench", "mcp_tools",
            "council_seat", "deliberator", "write_bench", "seat_findings"} <= set(names)
    undocumented = [n for n in names if not re.search(rf"`[^`\n]*\b{n}\b[^`\n]*`", docs)]
    assert not undocumented, f"not documented in docs/: {undocumented}"
    unused = [n for n, f in names.items() if not inspect.isclass(f)
              and not re.search(rf"\b{n}\b", examples)]
    assert not unused, f"used by no example in examples/: {unused}"


def test_the_kit_runs_each_mode_through_the_app_never_its_run_objects():
    """The kit's modes are the app's requests prepared and started as every face does: a
    kit module that builds a council, deliberation or bench run itself would test a path
    no user takes."""
    core_runs = {"orchestrator.council.run", "orchestrator.deliberation.run",
                 "orchestrator.bakeoff.run", "orchestrator.app.council",
                 "orchestrator.app.bench", "orchestrator.app.wave"}
    for path in (ROOT / "orchestrator" / "testing").glob("*_kit.py"):
        bad = [node.module for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ImportFrom) and node.module in core_runs]
        assert not bad, f"{path.name} imports {bad}"
    source = inspect.getsource(OrchKit._drive)
    assert "prepare(request)" in source and "choosing(choice)" in source
    for name in ("run_council", "run_deliberation", "run_bench"):
        assert "self._drive(" in inspect.getsource(getattr(OrchKit, name)), name


def test_a_council_through_the_kit_reads_the_scripted_seats_as_orch_reads_a_model(
        orch, scripted_server):
    from orchestrator import runtime

    scripted_server.script("alpha", council_seat([finding("SQL injection", "blocker",
                                                          "db.py:10")]))
    scripted_server.script("bravo", council_seat(["race in the cache"], vote="dispute"))
    scripted_server.script("chair", council_chair("fix-first"))
    run = orch.run_council(["alpha", "bravo"], plugins=[Marker()])
    assert (run.status, run.verdict, run.exit_code) == ("complete", "fix-first", 0)
    # every request of every stage passed the test's plugin
    assert run.bodies and all(b["messages"][0]["content"] == MARK for b in run.bodies)
    tiers = {g["claim"]: g["tier"] for g in run.tally["groups"]}
    assert tiers == {"SQL injection": "disputed", "race in the cache": "confirmed"}
    assert [s["name"] for s in run.doc["stages"]] == ["review", "judge", "chair-1"]
    where = {leg["kind"]: leg["where"] for leg in run.legs()}
    assert where["seat"] == {"stage": "review", "run": run.doc["run_id"], "round": None,
                             "bench": False}
    assert where["judge"]["stage"] == "judge" and where["chair"]["stage"] == "chair-1"
    # orchestrator.modes reads a seat's answer as the council did
    for leg in run.legs("review"):
        seat = leg["model"]
        assert modes.seat_findings(leg["answer"]) == [
            {k: v for k, v in f.items() if k != "id"} for f in run.findings(seat)]
    # outside the kit's block, the process's plugins are its own again
    assert "marker" not in runtime.plugin_manager().infos


def test_a_deliberation_through_the_kit_reads_each_round(orch, scripted_server):
    scripted_server.script("a", deliberator("42"))
    scripted_server.script("b", deliberator("41", decision="revise", revised="42", vote=None))
    run = orch.run_deliberation(["a", "b"], "What is 6 x 7?", rounds=2, plugins=[Marker()])
    assert all(b["messages"][0]["content"] == MARK for b in run.bodies)
    assert run.decisions(2) == {"scripted/a": "keep", "scripted/b": "revise"}
    assert run.votes(2) == {"scripted/a": "Answer A", "scripted/b": "declined"}
    assert run.replies(1) == {"scripted/a": "42", "scripted/b": "41"}
    assert {m: modes.round_reply(text)["decision"] for m, text in run.replies(2).items()} == \
        run.decisions(2)
    assert modes.round_reply("no block at all") is None
    assert run.winner["answer"].strip() == "42" and [r["round"] for r in run.rounds] == [1, 2]


def test_a_bench_trial_through_the_kit_is_graded_by_the_tasks_check(orch, scripted_server):
    from orchestrator.testing.scripted_server import Reply

    scripted_server.script("m", Reply(text="The answer is 42."))
    run = orch.run_trial("m", "What is 6 x 7?", expect={"regex": r"\b42\b"},
                         plugins=[Marker()])
    assert run.passed and run.trial["check_output"] == "all expectations hold"
    assert run.bodies[0]["messages"][0]["content"] == MARK
    failed = orch.run_trial("m", "What is 6 x 7?", expect={"equals": "41"})
    assert not failed.passed and failed.bodies[0]["messages"][0]["role"] != "system"
    assert run.path.exists() and run.doc["trials"][0]["task"] == "task"
