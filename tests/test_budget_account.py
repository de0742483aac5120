"""The cost ceiling as a running account, and budget guards that cannot be off silently.

Every request claims its worst case before it is sent and settles with its real cost; the
proofs run real waves against the scripted server and read the SQLite ledger.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.errors import LegError
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


class Echo:
    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {"i": {"type": "integer"}}},
                     lambda **kw: "e")]


def ledger(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


def worker(steps: int, out_tokens: int, prompt_tokens: int | None = None):
    """Calls the tool until it has taken ``steps`` steps (or is asked without tools), then
    answers; every reply reports ``out_tokens`` (never more than the request reserved)."""
    def reply(body, n):
        cap = body.get("max_tokens") or out_tokens
        usage = {"completion_tokens": min(out_tokens, int(cap))}
        if prompt_tokens is not None:
            usage["prompt_tokens"] = prompt_tokens
        if body.get("tools") and n + 1 < steps:
            return Reply(tool_calls=[{"name": "echo", "arguments": {"i": n}}], usage=usage)
        return Reply(text=f"answer after {n + 1} steps", usage=usage)
    return reply


def test_nine_priced_steps_under_max_cost_5(orch, scripted_server, orch_home):
    """The probe from the issue: $1 a step, 9 steps, --max-cost 5 spent $9 and exited 0."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", worker(steps=9, out_tokens=1000))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "work", "--max-cost",
                                      "5", "--output-budget", "1000", "--json"],
)
    doc = json.loads(result.stdout)
    # each request claims 1,000 output tokens ($1) plus its input before it is sent
    rows = ledger(orch_home)
    total = sum(r["cost_usd"] for r in rows)
    worst = max(b["max_tokens"] for b in (r.body for r in scripted_server.chats)) * 1e-3 \
        + max(r["input_tokens"] for r in rows) * 1e-6
    assert total <= 5 + worst
    assert total <= 5  # here every estimate held: within the ceiling itself
    assert result.exit_code == 2
    leg = doc["legs"][0]
    assert leg["status"] == "complete" and leg["stopped"] == "cost_ceiling"
    assert leg["finished"] is False
    assert any(n.startswith("cost ceiling: the next request could cost up to $")
               for n in leg["notes"])
    bodies = [r.body for r in scripted_server.chats]
    assert len(bodies) < 9 and "tools" not in bodies[-1]  # a tool-less final request
    assert all("tools" in b for b in bodies[:-1])
    assert doc["degraded"] == [f"stopped on a budget before finishing: {leg['leg_id']}"]


def test_a_request_that_cannot_fit_even_as_the_final_one_is_refused(orch, scripted_server,
                                                                    orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", worker(steps=9, out_tokens=1000))
    run = orch.run_leg("m", "work", plugins=[("echo", Echo())],
                       options={"max_cost": 2.1, "output_budget": 1000})
    # step 1 claims ~$1 and spends $1; step 2 claims ~$1 (fits: $2.1); step 3 has $0.1 left,
    # under 256 output tokens: nothing is sent
    assert scripted_server.count("m") == 2
    assert run.leg["status"] == "refused"
    assert run.leg["reason"].startswith("BUDGET_CEILING: scripted/m's next request could cost "
                                        "up to $1.00")
    assert "nothing was sent; raise --max-cost" in run.leg["reason"]
    row = ledger(orch_home)[-1]
    assert row["status"] == "refused" and row["cost_usd"] == pytest.approx(2.0, abs=0.01)
    assert row["output_tokens"] == 2000  # what was billed stays on the row


def test_known_spend_past_the_ceiling_exits_2_with_over_ceiling(orch, scripted_server):
    """An estimate that runs low (the provider counts 50,000 input tokens for a short
    prompt): the request was allowed, the spend passed the ceiling; the wave says so."""
    orch.provider(input_cost_per_mtok=100.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="ok", usage={"prompt_tokens": 50_000,
                                                        "completion_tokens": 10}))
    run = orch.run_leg("m", "short", options={"max_cost": 1.0, "output_budget": 100})
    doc = run.doc
    assert run.leg["status"] == "complete" and doc["cost_usd"] == pytest.approx(5.00001)
    assert doc["over_ceiling_usd"] == pytest.approx(4.00001)
    assert doc["exit_code"] == 2
    assert any(n.startswith("cost ceiling $1 passed: the wave's known spend is $5.0000")
               for n in doc["notices"])
    assert any(d.startswith("known spend $5.0000 passed the cost ceiling $1") for d in
               doc["degraded"])
    within = orch.run_leg("m", "short", options={"max_cost": 10.0, "output_budget": 100})
    assert within.doc["over_ceiling_usd"] is None and within.doc["exit_code"] == 0


def test_a_ceiling_without_an_output_budget_sends_the_reservation_it_claimed(orch,
                                                                            scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)  # no known ceiling
    run = orch.run_leg("m", "hi", options={"max_cost": 1.0})
    assert run.bodies[0]["max_tokens"] == 4096  # the claim bounds what can come back
    plain = orch.run_leg("m", "hi")
    assert "max_tokens" not in plain.bodies[0]  # no ceiling: nothing changes


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=st.integers(1, 9), legs=st.integers(1, 3),
       out_price=st.sampled_from([1.0, 50.0, 400.0, 1000.0]),
       in_price=st.sampled_from([0.1, 1.0, 10.0]),
       out_tokens=st.integers(1, 1500), budget=st.sampled_from([300, 1000, 2000]),
       ceiling=st.floats(0.05, 8.0))
def test_property_the_ledger_never_passes_the_ceiling_by_more_than_one_request(
        orch, scripted_server, orch_home, steps, legs, out_price, in_price, out_tokens,
        budget, ceiling):
    orch.provider(input_cost_per_mtok=in_price, output_cost_per_mtok=out_price)
    models = [f"m{i}" for i in range(legs)]
    for model in models:
        scripted_server.script(model, worker(steps=steps, out_tokens=out_tokens))
    before = len(ledger(orch_home)) if (orch_home / "ledger.db").exists() else 0
    sent_before = len(scripted_server.chats)
    run = orch.run_wave(models, "work", plugins=[("echo", Echo())],
                        options={"max_cost": ceiling, "output_budget": budget})
    rows = ledger(orch_home)[before:]
    assert len(rows) == legs  # every leg has its row, whatever its end
    total = sum(r["cost_usd"] or 0 for r in rows)
    sent = scripted_server.chats[sent_before:]
    if sent:
        worst = max(max(r.body.get("max_tokens") or budget for r in sent) * out_price / 1e6
                    + max(r["input_tokens"] for r in rows) * in_price / 1e6, 0.0)
    else:
        worst = 0.0
    assert total <= ceiling + worst + 1e-9
    assert total == pytest.approx(run.doc["cost_usd"], abs=1e-6)
    if run.doc["exit_code"] == 0:
        assert total <= ceiling + 1e-9
    if total > ceiling + 1e-9:
        assert run.doc["exit_code"] == 2 and run.doc["over_ceiling_usd"] > 0


# -- guards that were asked for cannot be off silently -------------------------------------------

BUDGET_FLAGS = [
    (["--max-cost", "0.01"], "cost_ceiling"),
    (["--output-budget", "100"], "output_budget"),
    (["--thinking", "low"], "output_budget"),
    (["--leg-tokens", "10"], "turn_budget"),
    (["--leg-seconds", "5"], "turn_budget"),
]


@pytest.mark.parametrize(("flag", "plugin"), BUDGET_FLAGS, ids=[f[0][0] for f in BUDGET_FLAGS])
def test_no_plugins_with_a_budget_flag_is_a_usage_error(orch, scripted_server, orch_home,
                                                        flag, plugin):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "--no-plugins",
                                      *flag])
    assert result.exit_code == 2
    assert scripted_server.count() == 0 and not (orch_home / "ledger.db").exists()
    assert f"{flag[0]} needs the {plugin} plugin, which is not loaded (--no-plugins loads no " \
           f"plugins); drop --no-plugins, or drop {flag[0]}" in result.stderr


@pytest.mark.parametrize(("flag", "plugin"), BUDGET_FLAGS, ids=[f[0][0] for f in BUDGET_FLAGS])
def test_a_budget_flag_whose_plugin_is_disabled_by_name_is_a_usage_error(
        orch, scripted_server, orch_home, monkeypatch, flag, plugin):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", plugin)
    from orchestrator import runtime

    runtime.plugin_manager.cache_clear()
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", *flag])
    assert result.exit_code == 2 and scripted_server.count() == 0
    # every budget flag is its plugin's (register_options): it does not exist while it is off
    assert f"No such option '{flag[0]}'" in result.output


def test_thinking_none_needs_no_plugin(orch, scripted_server):
    orch.provider()
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "--no-plugins",
                                      "--thinking", "none"])
    assert result.exit_code == 0 and scripted_server.count() == 1


# -- billed tokens never vanish ------------------------------------------------------------------

class Raises:
    def __init__(self, exc):
        self.exc = exc

    @hookimpl
    def after_response(self, leg, request, response):
        raise self.exc


@pytest.mark.parametrize("exc", [LegError("CHECK", "the answer failed a check"),
                                 RuntimeError("a plugin bug")], ids=["LegError", "crash"])
def test_a_raising_after_response_plugin_leaves_the_billed_usage_in_the_ledger(
        orch, scripted_server, orch_home, exc):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="answer", usage={"prompt_tokens": 1000,
                                                            "completion_tokens": 500}))
    run = orch.run_leg("m", "q", plugins=[("raises", Raises(exc))])
    row = ledger(orch_home)[-1]
    assert (row["input_tokens"], row["output_tokens"]) == (1000, 500)
    assert row["cost_usd"] == pytest.approx(1.5) and row["cost_source"] == "declared"
    if isinstance(exc, LegError):
        assert run.leg["status"] == "error" and row["reason"].startswith("CHECK: ")
    else:  # an isolated plugin failure: the leg goes on
        assert run.leg["status"] == "complete"


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_ceiling_that_is_no_number_stops_the_wave(orch, scripted_server, value):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "--max-cost",
                                      value, "--tools", "none"])
    assert result.exit_code == 2 and scripted_server.count() == 0
    # the CLI's number check (cli/params.py) says it first, as a usage error
    assert f"Invalid value for '--max-cost': {value!r} is not a finite number" in result.stderr


def test_a_ceiling_from_config_is_validated_and_written_into_the_options(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    orch.config(plugin_config={"cost_ceiling": {"max_usd": "lots"}})
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "--tools", "none"])
    assert result.exit_code == 2 and scripted_server.count() == 0
    assert "plugin_config.cost_ceiling.max_usd 'lots' is not a number of dollars" in \
        result.stderr
    orch.config(plugin_config={"cost_ceiling": {"max_usd": 3}})
    run = orch.run_leg("m", "q")
    assert run.doc["options"]["max_cost"] == 3.0 and run.bodies[0]["max_tokens"] == 4096
