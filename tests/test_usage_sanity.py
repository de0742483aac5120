"""Usage that cannot lie, one vocabulary the ledger enforces, and empty answers that are not
complete: hostile figures from a real HTTP server, the real ledger, the real CLI."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.engine.record import LegRecord
from orchestrator.ledger import COST_SOURCES, STATUSES, Ledger
from orchestrator.server import MAX_TOKEN_COUNT, usage_of
from orchestrator.testing.scripted_server import Reply

DOCS = Path(__file__).resolve().parents[1] / "docs"


def ledger(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


# (id, usage the server reports, input tokens recorded, suspect)
FUZZ = [
    ("negative", {"prompt_tokens": -1_000_000, "completion_tokens": 5}, 0, True),
    ("zero", {"prompt_tokens": 0, "completion_tokens": 0}, 0, False),
    ("whole-float", {"prompt_tokens": 12.0, "completion_tokens": 3}, 12, False),
    ("digit-string", {"prompt_tokens": "12", "completion_tokens": 3}, 12, False),
    ("huge-int", {"prompt_tokens": 10**20, "completion_tokens": 5}, MAX_TOKEN_COUNT, True),
    ("negative-output", {"prompt_tokens": 10, "completion_tokens": -7}, 10, True),
    # litellm itself cannot read these: the answer is lost, the leg ends error, no exception
    ("fractional-float", {"prompt_tokens": 3.7, "completion_tokens": 2}, 0, None),
    ("word-string", {"prompt_tokens": "lots", "completion_tokens": 2}, 0, None),
    ("float-1e20", {"prompt_tokens": 1e20, "completion_tokens": 5}, 0, None),
]


@pytest.mark.parametrize(("usage", "recorded", "suspect"), [f[1:] for f in FUZZ],
                         ids=[f[0] for f in FUZZ])
def test_hostile_usage_never_raises_never_goes_negative_and_every_row_is_written(
        orch, scripted_server, orch_home, usage, recorded, suspect):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="answer", usage=usage))
    run = orch.run_leg("m", "q")
    rows = ledger(orch_home)
    assert len(rows) == 1
    row = rows[0]
    assert row["input_tokens"] == recorded
    assert all(row[k] >= 0 for k in ("input_tokens", "output_tokens", "reasoning_tokens",
                                     "cached_tokens"))
    assert row["cost_usd"] is not None and row["cost_usd"] >= 0
    if suspect is None:
        assert run.leg["status"] == "error" and "Traceback" not in run.leg["reason"]
        assert row["cost_source"] == "none"
    else:
        assert run.leg["status"] == "complete"
        assert (row["cost_source"] == "suspect") is suspect
        assert any(n.startswith("suspect usage: ") for n in run.leg["notes"]) is suspect
    spend = json.loads(CliRunner().invoke(cli, ["spend", "--json"]).stdout)
    assert spend["total_cost_usd"] >= 0


def test_missing_usage_is_zero_and_not_suspect(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="answer", no_usage=True))
    run = orch.run_leg("m", "q")
    assert run.leg["status"] == "complete" and ledger(orch_home)[0]["cost_source"] == "declared"


def test_a_window_bounds_believable_counts(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0, context_window=5000)
    scripted_server.script("m", Reply(text="answer", usage={"prompt_tokens": 60_000,
                                                            "completion_tokens": 10}))
    run = orch.run_leg("m", "q")
    row = ledger(orch_home)[0]
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
    rows = {r["leg_id"]: r for r in ledger(orch_home)}  # legs end in any order
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
