"""Every plugin's config section is checked against the schema the plugin declares:
output_budget.tokens -5 (sent as max_tokens: -5) and 0 (silently no budget) stop orch fanout
in one line before any request, and fail orch doctor; doctor warns on budgets no ceiling or
window can back."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def rows(result) -> dict[tuple[str, str], dict]:
    return {(r["section"], r["check"]): r for r in json.loads(result.stdout)["checks"]}


@pytest.mark.parametrize(("value", "says"), [
    (-5, "plugin_config.output_budget.tokens must be at least 1, not -5"),
    (0, "plugin_config.output_budget.tokens must be at least 1, not 0"),
    ("lots", "plugin_config.output_budget.tokens must be a whole number, not a string")])
def test_a_bad_budget_is_refused_by_fanout_and_failed_by_doctor(orch, scripted_server,
                                                                orch_home, value, says):
    orch.provider()
    scripted_server.script("m", Reply(text="hi"))
    orch.config(plugin_config={"output_budget": {"tokens": value}})
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi",
                                      "--tools", "none"])
    assert result.exit_code == 2
    assert scripted_server.count() == 0 and not (orch_home / "ledger.db").exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "fix it" in lines[0]
    assert "Traceback" not in result.output
    doctor = CliRunner().invoke(cli, ["doctor", "--json"])
    assert doctor.exit_code == 1
    row = rows(doctor)[("plugins", "output_budget")]
    assert row["status"] == "fail" and says in row["detail"]


@pytest.mark.parametrize(("section", "value", "says"), [
    ("turn_budget", {"seconds": 0}, "plugin_config.turn_budget.seconds must be more than 0"),
    ("context_guard", {"inflation": 0.5}, "plugin_config.context_guard.inflation must be at "
                                          "least 1"),
    ("doom_loop", {"repeats": 1}, "plugin_config.doom_loop.repeats must be at least 2"),
    ("workspace", {"deny": "*.env"}, "plugin_config.workspace.deny must be a list"),
    ("wire_tags", {"headers": "yes"}, "plugin_config.wire_tags.headers must be true or false"),
])
def test_every_declared_section_is_checked(orch, scripted_server, section, value, says):
    orch.provider()
    orch.config(plugin_config={section: value})
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi"])
    assert result.exit_code == 2 and says in result.stderr, result.output
    assert scripted_server.count() == 0


def test_doctor_warns_on_budgets_no_ceiling_or_window_backs(orch, scripted_server):
    orch.provider("open")  # no max_output_tokens, no context_window
    orch.provider("small", context_window=4096, max_output_tokens=4096)
    scripted_server.script("m", Reply(text="x"))
    orch.config(aliases={"a": "open/m", "b": "small/m"},
                plugin_config={"output_budget": {"tokens": 3000}})
    got = rows(CliRunner().invoke(cli, ["doctor", "--json"]))
    assert got[("output budget", "a")]["status"] == "warn"
    assert "no output ceiling is known" in got[("output budget", "a")]["detail"]
    assert got[("output budget", "b")]["status"] == "warn"
    assert "above half its 4096-token window" in got[("output budget", "b")]["detail"]
