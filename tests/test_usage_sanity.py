"""Usage that cannot lie, one vocabulary the ledger enforces, and empty answers that are not
complete: hostile figures from a real HTTP server, the real ledger, the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_rows import ledger_rows

from orchestrator.cli import cli
from orchestrator.engine.record import LegRecord
from orchestrator.ledger.spend import COST_SOURCES, STATUSES, Ledger
from orchestrator.models.server import MAX_TOKEN_COUNT, usage_of
from orchestrator.testing.scripted_server import Reply

DOCS = Path(__file__).resolve().parents[1] / "docs"


# (id, usage the server reports, input tokens recorded, suspect)
FUZZ = [
    ("negative", {"prompt_tokens": -1_000_000, "completion_tokens": 5}, 0, True),
    ("zero", {"prompt_tokens": 0, "completion_tokens": 0}, 0, False),
    ("whole-float", {"prompt_tokens": 12.0, "completion_tokens": 3}, 12, False),
    ("digit-string", {"prompt_tokens": "12", "completion_tokens": 3}, 12, False),
    ("huge-int", {"prompt_tokens": 10**20, "completion_tokens": 5}, MAX_TOKEN_COUNT, True),
    ("negative-output", {"prompt_tokens": 10, "completion_tokens": -7}, 10, True),
    # litellm itself could not read these: the billed answer was lost (issue 24)
    ("fractional-float", {"prompt_tokens": 3.7, "completion_tokens": 2}, 3, True),
    ("float-12.5", {"prompt_tokens": 12.5, "completion_tokens": 2}, 12, True),
    ("word-string", {"prompt_tokens": "lots", "completion_tokens": 2}, 0, True),
    ("string-abc", {"prompt_tokens": "abc", "completion_tokens": 2}, 0, True),
    ("fraction-string", {"prompt_tokens": "12.5", "completion_tokens": 2}, 12, True),
    ("float-1e20", {"prompt_tokens": 1e20, "completion_tokens": 5}, MAX_TOKEN_COUNT, True),
    ("negative-float", {"prompt_tokens": -3.5, "completion_tokens": 2}, 0, True),
    ("output-string", {"prompt_tokens": 10, "completion_tokens": "many"}, 10, True),
    ("output-fraction", {"prompt_tokens": 10, "completion_tokens": 2.5}, 10, True),
    ("cached-string", {"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": "x"},
     10, True),
    ("reasoning-float", {"prompt_tokens": 10, "completion_tokens": 20,
                         "reasoning_tokens": 1.5}, 10, True),
    ("null-prompt", {"prompt_tokens": None, "completion_tokens": 2}, 0, True),
    ("dict-prompt", {"prompt_tokens": {"a": 1}, "completion_tokens": 2}, 0, True),
    ("list-prompt", {"prompt_tokens": [1], "completion_tokens": 2}, 0, True),
    ("huge-cached-float", {"prompt_tokens": 10, "completion_tokens": 2,
                           "cached_tokens": 1e30}, 10, True),
    # impossible, though every count is an int
    ("cached-above-prompt", {"prompt_tokens": 100, "completion_tokens": 2,
                             "cached_tokens": 1_000_000}, 100, True),
    ("reasoning-above-completion", {"prompt_tokens": 10, "completion_tokens": 5,
                                    "reasoning_tokens": 50}, 10, True),
]


@pytest.mark.parametrize(("usage", "recorded", "suspect"), [f[1:] for f in FUZZ],
                         ids=[f[0] for f in FUZZ])
def test_hostile_usage_keeps_the_answer_and_its_row_and_marks_it(
        orch, scripted_server, orch_home, usage, recorded, suspect):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="answer", usage=usage))
    run = orch.run_leg("m", "q")
    assert run.leg["status"] == "complete" and run.leg["answer"] == "answer"  # kept
    rows = ledger_rows(orch_home)
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "complete" and row["input_tokens"] == recorded
    counts = {k: row[k] for k in ("input_tokens", "output_tokens", "reasoning_tokens",
                                  "cached_tokens")}
    assert all(v >= 0 for v in counts.values())
    assert counts["cached_tokens"] <= counts["input_tokens"]
    assert counts["reasoning_tokens"] <= counts["output_tokens"]
    assert row["cost_usd"] is not None and row["cost_usd"] >= 0
    assert (row["cost_source"] == "suspect") is suspect
    assert (run.leg["cost_source"] == "suspect") is suspect
    assert any(n.startswith("suspect usage: ") for n in run.leg["notes"]) is suspect
    spend = json.loads(CliRunner().invoke(cli, ["spend", "--json"]).stdout)
    assert spend["total_cost_usd"] >= 0


def completion_with_usage(usage) -> Reply:
    return Reply(body={"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "answer"}}],
                       "usage": usage})


@pytest.mark.parametrize(("reply", "note"), [
    (Reply(text="answer", no_usage=True), "the provider reported no usage"),
    (completion_with_usage(None), "the provider reported no usage"),
    (completion_with_usage("abc"), "the provider's usage 'abc' is not an object"),
    (completion_with_usage(5), "the provider's usage 5 is not an object"),
    (completion_with_usage([]), "the provider's usage [] is not an object"),
], ids=["missing", "null", "string", "number", "list"])
def test_missing_or_shapeless_usage_keeps_the_answer_and_its_cost_is_unknown(
        orch, scripted_server, orch_home, reply, note):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", reply)
    run = orch.run_leg("m", "q")
    assert run.leg["status"] == "complete" and run.leg["answer"] == "answer"
    row = ledger_rows(orch_home)[0]
    assert row["status"] == "complete"
    assert row["cost_source"] == "unknown" and row["cost_usd"] is None
    assert run.doc["cost_exact"] is False  # the wave's total is a floor
    assert run.leg["notes"][0].startswith(note)


def test_reported_zeros_are_not_missing(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="answer", usage={"prompt_tokens": 0,
                                                            "completion_tokens": 0}))
    run = orch.run_leg("m", "q")
    assert ledger_rows(orch_home)[0]["cost_source"] == "declared" and run.doc["cost_exact"]


def test_a_window_bounds_believable_counts(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0, context_window=5000)
    scripted_server.script("m", Reply(text="answer", usage={"prompt_tokens": 60_000,
                                                            "completion_tokens": 10}))
    run = orch.run_leg("m", "q")
    row = ledger_rows(orch_home)[0]
    assert row["input_tokens"] == 50_000 and row["cost_source"] == "suspect"  # 10x the window
    assert "input_tokens 60,000 is past the bound of 50,000" in run.leg["notes"][0]


class Fields:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                          st.floats(allow_nan=True, allow_infinity=True),
                          st.text(max_size=12)), min_size=4, max_size=4))
def test_property_usage_of_is_total_and_bounded(values):
    p, c, r, k = values
    usage, note = usage_of(Fields(prompt_tokens=p, completion_tokens=c,
                                  completion_tokens_details=Fields(reasoning_tokens=r),
                                  prompt_tokens_details=Fields(cached_tokens=k)), 5000)
    for count in (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens,
                  usage.cached_tokens):
        assert isinstance(count, int) and 0 <= count <= 5000


def test_spend_shows_suspect_rows_on_a_line_of_their_own(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="a", usage={"prompt_tokens": -5,
                                                       "completion_tokens": 1_000_000}))
    scripted_server.script("n", Reply(text="b", usage={"prompt_tokens": 10,
                                                       "completion_tokens": 10}))
    orch.run_wave(["m", "n"], "q")
    out = CliRunner().invoke(cli, ["spend"]).stdout
    assert "suspect usage: 1 leg, $1.0000 of the total, from clamped token counts" in out
    data = json.loads(CliRunner().invoke(cli, ["spend", "--json"]).stdout)
    assert data["suspect_legs"] == 1 and data["suspect_cost_usd"] == pytest.approx(1.0)


# -- one vocabulary ------------------------------------------------------------------------------

ROW = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
       "status": "complete", "cost_source": "priced", "cost_usd": 0.1}


@pytest.mark.parametrize(("field", "value"), [
    ("status", "completed"), ("status", "running"), ("cost_source", "guessed"),
    ("cost_source", "Priced"), ("input_tokens", -1), ("input_tokens", 2**63),
    ("output_tokens", 1.5), ("cost_usd", -0.01), ("cost_usd", float("nan"))])
def test_the_ledger_refuses_values_outside_the_vocabulary(orch_home, field, value):
    ledger = Ledger()
    with pytest.raises(ValueError, match=field):
        ledger.append({**ROW, field: value})
    assert ledger.rows() == []


@pytest.mark.parametrize("source", COST_SOURCES)
def test_every_cost_source_is_accepted_and_documented(orch_home, source):
    Ledger().append({**ROW, "cost_source": source})
    table = (DOCS / "spend.md").read_text()
    assert re.search(rf"^\| `{source}` \|", table, re.M), f"{source} is not in docs/spend.md"


@pytest.mark.parametrize("status", STATUSES)
def test_every_status_is_documented(status):
    assert f"`{status}`" in (DOCS / "spend.md").read_text()


def test_a_leg_record_combines_cost_sources_least_trustworthy_first():
    rec = LegRecord(leg_id="l", wave_id="w", model="p/m", provider="p")
    assert rec.cost_source == "none" and rec.cost_usd == 0.0
    rec.add_cost(0.0, "free")
    rec.add_cost(0.5, "priced")
    assert (rec.cost_usd, rec.cost_source) == (0.5, "priced")
    rec.add_cost(0.25, "suspect")
    assert (rec.cost_usd, rec.cost_source) == (0.75, "suspect")
    rec.add_cost(None, "unknown")
    assert (rec.cost_usd, rec.cost_source) == (None, "suspect")


# -- an empty answer is not complete -------------------------------------------------------------

@pytest.mark.parametrize("reply", [Reply(text=""), Reply(text="  \n "),
                                   Reply(text="", finish_reason="stop")], ids=["empty", "blank",
                                                                               "stop"])
def test_an_empty_answer_ends_the_leg_error(orch, scripted_server, orch_home, reply):
    orch.provider()
    scripted_server.script("m", reply)
    scripted_server.script("n", Reply(text="a real answer"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m,scripted/n", "-p", "q",
                                      "--tools", "none", "--json"])
    doc = json.loads(result.stdout)
    empty = doc["legs"][0]
    assert empty["status"] == "error" and result.exit_code == 2  # partial
    assert empty["reason"] == ("empty_answer: scripted/m answered with neither text nor a tool "
                               "call (finish_reason stop)")
    rows = {r["leg_id"]: r for r in ledger_rows(orch_home)}  # legs end in any order
    assert rows[empty["leg_id"]]["reason"].startswith("empty_answer: ")
    assert rows[empty["leg_id"]]["status"] == "error"


@given(st.lists(st.integers(0, 10**9), min_size=8, max_size=8))
def test_usage_adds_and_writes_every_field(counts):
    """Usage spells its fields out (speed): a field added later must be added and written."""
    import dataclasses

    from orchestrator.request import Usage

    a, b = Usage(*counts[:4]), Usage(*counts[4:])
    names = [f.name for f in dataclasses.fields(Usage)]
    assert list((a + b).to_dict()) == names
    assert (a + b).to_dict() == {n: getattr(a, n) + getattr(b, n) for n in names}
