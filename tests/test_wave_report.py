"""The exit code reads the plugins' reports (``wave_report``), not names the engine knows.

Real waves on the scripted server: a third party's reason makes a clean wave exit 2 and is
listed in ``degraded``; a report that raises or answers wrongly is a wave notice and the wave
is written all the same; ``orch status`` rebuilding a killed wave asks the plugins again.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.engine.rebuild import load_wave
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply


class Quota:
    """A third party's own budget: it says what the wave's answers mean for the exit code."""

    NAME = "quota"

    @hookimpl
    def wave_report(self, wave, doc):
        words = sum(len((leg.get("answer") or "").split()) for leg in doc["legs"])
        if words <= 3:
            return None
        return {"degraded": [f"quota: {words} words answered, 3 allowed"],
                "fields": {"quota_words": words}}


class Broken:
    NAME = "broken_report"

    @hookimpl
    def wave_report(self, wave, doc):
        raise RuntimeError("report exploded")


class BrokenGuard:
    """A guard whose report must not go missing silently."""

    NAME = "broken_guard"
    FAIL_CLOSED = {"wave_report"}

    @hookimpl
    def wave_report(self, wave, doc):
        raise KeyError("spent")


class Greedy:
    NAME = "greedy"

    @hookimpl
    def wave_report(self, wave, doc):
        return {"fields": {"exit_code": 0, "status": "complete", "greedy_seen": True}}


class Wrong:
    NAME = "wrong"

    @hookimpl
    def wave_report(self, wave, doc):
        return {"degraded": "not a list"}


def test_a_plugins_reason_makes_a_complete_wave_exit_2(orch, scripted_server):
    scripted_server.script("m", Reply(text="one two three four five"))
    run = orch.run_leg("m", plugins=[Quota()])
    assert run.leg["status"] == "complete" and run.doc["status"] == "complete"
    assert run.doc["exit_code"] == 2
    assert run.doc["degraded"] == ["quota: 5 words answered, 3 allowed"]
    assert run.doc["quota_words"] == 5
    on_disk = json.loads((run.runs_dir / run.doc["wave_id"] / "wave.json").read_text())
    assert on_disk["degraded"] == run.doc["degraded"] and on_disk["exit_code"] == 2

    scripted_server.script("m", Reply(text="short"))
    clean = orch.run_leg("m", plugins=[Quota()])
    assert clean.doc["exit_code"] == 0 and clean.doc["degraded"] == []
    assert "quota_words" not in clean.doc


@pytest.mark.parametrize("plugin,said", [
    (Broken(), "plugin broken_report failed in wave_report: RuntimeError: report exploded"),
    (Wrong(), "plugin wrong failed in wave_report: WrongAnswer: wave_report returned "
              "\"degraded\": not a list"),
])
def test_a_failing_report_is_a_notice_and_the_wave_goes_on(orch, scripted_server, plugin,
                                                            said):
    scripted_server.script("m", Reply(text="one two three four five"))
    run = orch.run_leg("m", plugins=[plugin, Quota()])
    assert run.leg["status"] == "complete" and run.leg["answer"] == "one two three four five"
    assert any(n.startswith(said) for n in run.doc["notices"]), run.doc["notices"]
    # the other plugin's report still counts
    assert run.doc["degraded"] == ["quota: 5 words answered, 3 allowed"]
    assert run.doc["exit_code"] == 2


def test_a_fail_closed_plugins_failing_report_is_never_a_clean_run(orch, scripted_server):
    scripted_server.script("m", Reply(text="short"))
    run = orch.run_leg("m", plugins=[BrokenGuard()])
    assert run.leg["status"] == "complete" and run.doc["exit_code"] == 2
    assert run.doc["degraded"] == [
        "plugin broken_guard failed in wave_report (KeyError: 'spent'); it is fail-closed, "
        "so the wave is not a clean run"]
    assert "plugin broken_guard failed in wave_report: KeyError: 'spent'" in run.doc["notices"]


def test_a_report_cannot_replace_what_the_engine_writes(orch, scripted_server):
    scripted_server.script("m", Reply(text="one two three four five"))
    run = orch.run_leg("m", plugins=[Greedy(), Quota()])
    assert run.doc["exit_code"] == 2 and run.doc["greedy_seen"] is True
    assert "plugin greedy's wave_report set 'exit_code', a field orch writes itself; " \
        "ignored" in run.doc["notices"]


def test_a_rebuilt_wave_asks_the_plugins_again(orch, scripted_server):
    """A wave killed after its legs ended (wave.json still ``running``, its process gone):
    orch status rebuilds the document, and the cost ceiling's report still makes it exit 2."""
    orch.provider(input_cost_per_mtok=100.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="ok", usage={"prompt_tokens": 50_000,
                                                        "completion_tokens": 10}))
    run = orch.run_leg("m", "short", options={"max_cost": 1.0, "output_budget": 100})
    assert run.doc["exit_code"] == 2 and run.doc["over_ceiling_usd"] == pytest.approx(4.00001)
    path = run.runs_dir / run.doc["wave_id"] / "wave.json"
    killed = {k: v for k, v in run.doc.items() if k not in ("over_ceiling_usd", "degraded")}
    killed.update(status="running", exit_code=0, pid=2 ** 22 + 1, pid_started=None)
    path.write_text(json.dumps(killed))
    doc = load_wave(run.runs_dir, run.doc["wave_id"])
    assert doc["rebuilt"] is True and doc["status"] == "complete"
    assert doc["over_ceiling_usd"] == pytest.approx(4.00001)
    assert doc["exit_code"] == 2
    assert any(d.startswith("known spend $5.0000 passed the cost ceiling $1") for d in
               doc["degraded"])
