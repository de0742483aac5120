"""Output reservations, starvation, overrun and OUTPUT_LENGTH, shown on the wire: the scripted
server enforces a context window (prompt + max_tokens > window is the provider's 400)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.hookspecs import hookimpl
from orchestrator.models.reserve import answer_reserve
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

PROSE = ("The wave sends one briefing to every model and waits for each answer in turn. "
         "A guard looks at the request before it leaves and decides whether it fits. ")


def ledger(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


class Echo:
    """One tool, so a leg takes several steps."""

    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda: "e" * 40)]


# -- output reservation ------------------------------------------------------------------------

def test_reservation_is_the_budget_capped_by_the_model_ceiling(orch, scripted_server):
    orch.provider(max_output_tokens=2000, context_window=100_000)
    capped = orch.run_leg("m", "hi", options={"output_budget": 5000})
    assert capped.bodies[0]["max_tokens"] == 2000
    assert capped.leg["output_reservation"] == 2000
    logged = [e for e in capped.conversation() if e["type"] == "request"]
    assert logged[0]["params"]["max_tokens"] == 2000  # the reservation, on the request's line
    assert capped.leg["notes"] == ["output budget 5000 capped at scripted/m's output ceiling 2000"]
    under = orch.run_leg("m", "hi", options={"output_budget": 700})
    assert under.bodies[0]["max_tokens"] == 700 and under.leg["notes"] == []


def test_no_budget_sends_what_it_sent_before_and_says_nothing(orch, scripted_server):
    orch.provider(max_output_tokens=2000)
    run = orch.run_leg("m", "hi")
    assert "max_tokens" not in run.bodies[0] and "max_completion_tokens" not in run.bodies[0]
    assert "output_reservation" not in run.leg and run.leg["notes"] == []


def test_budget_from_config_without_a_known_ceiling_is_sent_as_is(orch, scripted_server):
    orch.provider()
    orch.config(plugin_config={"output_budget": {"tokens": 1234}})
    run = orch.run_leg("m", "hi")
    assert run.bodies[0]["max_tokens"] == 1234


def test_thinking_on_an_undeclared_model_is_refused_in_preflight(orch, scripted_server,
                                                                 orch_home):
    orch.provider()
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m,scripted/n", "-p", "hi",
                                      "--thinking", "high", "--tools", "none"])
    assert result.exit_code == 2
    assert scripted_server.count() == 0  # no leg ran, not even the other one
    assert result.stderr.startswith("orch: error: refused before any spend: "
                                    "VARIANT_UNDECLARED: scripted/m does not declare "
                                    "reasoning effort")
    assert "scripted/n does not declare" in result.stderr  # every leg is checked
    assert not (orch_home / "ledger.db").exists()


def test_thinking_none_is_a_no_op_on_any_model(orch, scripted_server):
    orch.provider()  # no reasoning support declared
    run = orch.run_leg("m", "hi", options={"thinking": "none"})
    assert run.leg["status"] == "complete"
    assert "reasoning_effort" not in run.bodies[0] and "max_tokens" not in run.bodies[0]


def test_the_chair_is_checked_in_preflight_too(orch, scripted_server):
    orch.provider()
    orch.provider("thinker", supports_reasoning=True)
    result = CliRunner().invoke(cli, ["fanout", "-m", "thinker/m", "-p", "hi", "--chair",
                                      "scripted/judge", "--thinking", "low", "--tools", "none"])
    assert result.exit_code == 2 and scripted_server.count() == 0
    assert "VARIANT_UNDECLARED: scripted/judge" in result.stderr


def test_thinking_on_a_declared_reasoning_model_sends_reasoning_effort(orch, scripted_server):
    orch.provider(supports_reasoning=True)
    run = orch.run_leg("m", "hi", options={"thinking": "low", "output_budget": 900})
    assert run.bodies[0]["reasoning_effort"] == "low" and run.bodies[0]["max_tokens"] == 900
    assert run.leg["status"] == "complete"


@pytest.mark.parametrize("budget", [8000, 16000, 32000, 64000])
def test_anthropic_thinking_is_carved_out_of_the_output_budget(orch, scripted_server,
                                                               monkeypatch, budget):
    # Should anything leave, it goes to the scripted server, never to the internet.
    monkeypatch.setenv("ANTHROPIC_API_BASE", scripted_server.url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    fits = orch.run_leg("anthropic/claude-sonnet-4-5", "hi",
                        options={"thinking": "low", "output_budget": budget})
    body = fits.bodies[0]
    assert fits.requests[0].path == "/v1/messages"
    # low = a 1,024-token thinking budget inside max_tokens; the answer keeps the rest
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == budget  # claude-sonnet-4-5's ceiling is 64,000


def test_anthropic_thinking_that_leaves_no_answer_is_refused_in_preflight(
        orch, scripted_server, orch_home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_BASE", scripted_server.url.removesuffix("/v1"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    result = CliRunner().invoke(cli, ["fanout", "-m", "anthropic/claude-sonnet-4-5", "-p", "hi",
                                      "--thinking", "high", "--output-budget", "5000",
                                      "--tools", "none"])
    assert result.exit_code == 2 and scripted_server.count() == 0
    assert ("VARIANT_OVER_BUDGET: anthropic/claude-sonnet-4-5: --thinking high takes a "
            "4096-token thinking budget out of the 5000-token output reservation, leaving "
            "904 for the answer (at least 1024 needed); raise --output-budget to 5120 or "
            "lower --thinking") in result.stderr
    assert not (orch_home / "ledger.db").exists()


# -- starvation and overrun ----------------------------------------------------------------------

def test_starvation_refuses_and_never_contacts_the_server(orch, scripted_server, orch_home):
    orch.provider(context_window=6000)
    scripted_server.window("m", 6000)
    # ~4,300 tokens: past window - the 2,048-token reserve a 6,000-token window keeps
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", PROSE * 140,
                                      "--output-budget", "1000", "--tools", "none"])
    assert scripted_server.count() == 0
    assert result.exit_code == 1  # the only leg refused: nothing completed
    assert "Reason: OUTPUT_STARVATION: refused (scripted/m): context estimate " in result.stdout
    assert "orch: scripted/m (" in result.stderr  # the leg's note: one line on stderr
    assert "): output starvation: refused (scripted/m): context estimate" in result.stderr
    assert "window 6000, output budget 1000" in result.stdout
    row = ledger(orch_home)[-1]
    assert row["status"] == "refused" and row["reason"].startswith("OUTPUT_STARVATION")
    assert row["input_tokens"] == 0 and row["cost_usd"] == 0


def test_overrun_fit_avoids_the_rejection_the_server_would_send(orch, scripted_server,
                                                               monkeypatch):
    orch.provider(context_window=12000)
    scripted_server.window("m", 12000)
    prompt = PROSE * 110  # ~3,500 tokens; with a 10,000 reservation it passes the window
    # Without the guard the provider rejects the whole request.
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "context_guard")
    bare = orch.run_leg("m", prompt, options={"output_budget": 10000})
    assert bare.leg["status"] == "error" and bare.leg["reason"].startswith("context_overflow")
    assert bare.requests[0].status == 400 and bare.bodies[0]["max_tokens"] == 10000
    monkeypatch.delenv("ORCH_DISABLE_PLUGINS")
    guarded = orch.run_leg("m", prompt, options={"output_budget": 10000})
    assert guarded.leg["status"] == "complete"
    assert guarded.requests[0].status == 200
    sent = guarded.bodies[0]["max_tokens"]
    fit = guarded.leg["output_fits"][0]
    assert sent == fit["fit"] == 12000 - fit["estimate"] - answer_reserve(12000)
    assert 1024 <= sent < 10000
    assert [n for n in guarded.leg["notes"] if n.startswith("output overrun: fitted")] == [
        f"output overrun: fitted (scripted/m) at step 1: window 12000, context estimate "
        f"{fit['estimate']} (estimated), output budget 10000 -> {sent}"]


def test_overrun_anchors_on_the_reported_prompt_and_refuses_below_the_minimum_answer(
        orch, scripted_server, orch_home):
    orch.provider(context_window=20000)
    # The provider says the first prompt was far bigger than it looks (a dense tokenizer).
    scripted_server.script("m", Reply(tool_calls=[{"name": "echo", "arguments": {}}],
                                      usage={"prompt_tokens": 16200, "completion_tokens": 5}),
                           Reply(text="done"))
    run = orch.run_leg("m", "short question", plugins=[("echo", Echo())],
                       options={"output_budget": 8000})
    assert len(run.bodies) == 1  # step 2 was refused, not sent
    assert run.leg["status"] == "refused"
    assert run.leg["reason"].startswith("OUTPUT_OVERRUN: refused (scripted/m): room for ")
    assert "(anchored on 16200 reported)" in run.leg["reason"]
    assert ledger(orch_home)[-1]["status"] == "refused"


def test_overrun_with_an_anchor_fits_each_step_once(orch, scripted_server):
    orch.provider(context_window=20000)
    scripted_server.script("m", Reply(tool_calls=[{"name": "echo", "arguments": {}}],
                                      usage={"prompt_tokens": 9000, "completion_tokens": 5}),
                           Reply(text="done"))
    run = orch.run_leg("m", "short question", plugins=[("echo", Echo())],
                       options={"output_budget": 12000})
    assert run.leg["status"] == "complete"
    first, second = run.bodies
    assert first["max_tokens"] == 12000  # its own estimate is small: nothing to fit
    fit = run.leg["output_fits"][-1]
    assert fit["step"] == 2 and second["max_tokens"] == fit["fit"] < 12000
    assert fit["fit"] == 20000 - fit["estimate"] - answer_reserve(20000)
    # the anchor: 9,000 reported plus twice the estimate of what came after
    assert 9000 < fit["estimate"] < 9400
    assert sum("anchored on 9000 reported" in n for n in run.leg["notes"]) == 1


def test_without_an_anchor_it_never_refuses_on_its_own_guess(orch, scripted_server):
    orch.provider(context_window=6000)
    scripted_server.window("m", 6000)
    run = orch.run_leg("m", PROSE * 110, options={"output_budget": 8000})
    # ~3,400 tokens: room for 6000 - 3400 - 2048 < 1024, yet no anchor, so no refusal: sent as is
    assert run.bodies[0]["max_tokens"] == 8000
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("context_overflow")
    assert "output_fits" not in run.leg and not [n for n in run.leg["notes"] if "overrun" in n]


def test_anthropic_style_thinking_budget_is_lowered_with_the_fit(orch, scripted_server):
    orch.provider(context_window=12000)

    class Thinking:  # a route that sends its thinking budget explicitly
        @hookimpl
        def before_request(self, leg, request):
            return request.evolve(params={**request.params, "max_tokens": 10000,
                                          "thinking": {"type": "enabled",
                                                       "budget_tokens": 6000}})

    run = orch.run_leg("m", PROSE * 110, plugins=[("thinking", Thinking())])
    fit = run.leg["output_fits"][0]
    assert fit["thinking_fit"] == min(6000, fit["fit"] - 1024)
    # litellm drops `thinking` on the OpenAI route, so read what orch handed it
    sent = [e for e in run.conversation() if e["type"] == "request"][0]["params"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": fit["thinking_fit"]}
    assert sent["max_tokens"] == run.bodies[0]["max_tokens"] == fit["fit"]
    assert "thinking budget 6000 -> " in run.leg["notes"][0]


# -- OUTPUT_LENGTH -------------------------------------------------------------------------------

def test_length_with_no_answer_is_an_error_naming_the_counts(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="", finish_reason="length", reasoning="x" * 400,
                                      usage={"completion_tokens": 500, "reasoning_tokens": 500}))
    run = orch.run_leg("m", "think hard", options={"output_budget": 500})
    assert run.leg["status"] == "error"
    assert run.leg["reason"] == (
        "OUTPUT_LENGTH: scripted/m stopped at the output reservation with no answer: 500 "
        "reasoning and 500 output tokens against a budget of 500 tokens; raise "
        "--output-budget or lower --thinking")
    row = ledger(orch_home)[-1]
    assert row["status"] == "error" and row["output_tokens"] == 500  # billed, and recorded
    assert row["cost_usd"] > 0


def test_length_with_text_completes_truncated_with_a_note(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="The first half of a long answ",
                                      finish_reason="length"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "go",
                                      "--output-budget", "64", "--tools", "none"])
    assert result.exit_code == 0, result.output
    assert "answer truncated" not in result.stdout  # the answer is the output; the note is not
    notes = [line for line in result.stderr.splitlines() if "answer truncated" in line]
    assert len(notes) == 1 and notes[0].startswith("orch: scripted/m (")
    assert "): answer truncated: scripted/m stopped at the output reservation (64 tokens" \
        in notes[0]
    doc = json.loads(CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "go",
                                              "--output-budget", "64", "--tools", "none",
                                              "--json"]).stdout)
    assert doc["legs"][0]["truncated"] is True and doc["legs"][0]["status"] == "complete"


def test_council_checks_every_seat_and_its_chair_in_preflight(orch, scripted_server, orch_home):
    orch.provider("thinker", supports_reasoning=True)
    orch.provider()
    result = CliRunner().invoke(cli, ["council", "run", "-p", "Review this.", "-m",
                                      "thinker/a,thinker/b", "--chair", "scripted/judge",
                                      "--thinking", "low"])
    assert result.exit_code == 2 and scripted_server.count() == 0, result.output
    assert "refused before any spend: VARIANT_UNDECLARED: scripted/judge" in result.stderr


def test_an_output_budget_in_config_that_is_no_number_stops_the_wave(orch, scripted_server):
    orch.provider()
    orch.config(plugin_config={"output_budget": {"tokens": "lots"}})
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "q", "--tools", "none"])
    assert result.exit_code == 2 and scripted_server.count() == 0
    assert "plugin_config.output_budget.tokens must be a whole number, not a string" \
        in result.stderr


def test_a_variants_smaller_cap_is_kept_and_checked_in_preflight(orch, scripted_server):
    orch.provider(supports_reasoning=True)
    orch.config(variants={"short": {"max_tokens": 300}})
    run = orch.run_leg("m@short", "hi", options={"thinking": "low", "output_budget": 2000})
    body = run.bodies[0]
    assert body["max_tokens"] == 300 and body["reasoning_effort"] == "low"
    only_thinking = orch.run_leg("m@short", "hi", options={"thinking": "low"})
    assert only_thinking.bodies[0]["max_tokens"] == 300  # not dropped by --thinking alone
