"""Unknown is not zero: an answer whose cost cannot be read from its usage (no usage block,
garbage counts, ``prompt_tokens: true``) keeps its claim — the worst case it was sent with —
as spent, so the ceiling stops the leg; the record says the total is an upper bound, never
``cost_exact: true``, and the run never exits 0 with ``degraded: []``.

The issue's case through `orch fanout`: a provider priced at $1,000 per million tokens,
``--max-cost 5``, each request sent with ``max_tokens`` 4,096 (a claim of about $4.17).
Before, 8 requests went out (about $33 of worst case).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

USAGES = {
    "no usage block": {"no_usage": True},
    "garbage counts": {"usage": {"prompt_tokens": "abc", "completion_tokens": -5}},
    "prompt_tokens true": {"usage": {"prompt_tokens": True, "completion_tokens": 5}},
}


def unreadable(kind: str):
    """A tool call on every request that offers tools, else an answer; usage as ``kind``."""
    def reply(body, n):
        if body.get("tools"):
            return Reply(tool_calls=[{"name": "list", "arguments": {}}], **USAGES[kind])
        return Reply(text="what I found", **USAGES[kind])
    return reply


@pytest.mark.parametrize("kind", list(USAGES))
def test_an_answer_whose_cost_cannot_be_read_keeps_its_claim_and_the_ceiling_stops_the_leg(
        kind, orch, scripted_server, orch_home, tmp_path):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", unreadable(kind))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "List the folder.",
                                      "--workspace", str(tmp_path), "--max-steps", "8",
                                      "--max-cost", "5", "--json"])
    doc = json.loads(result.stdout)
    sent = [r.body for r in scripted_server.chats]
    # on the wire: the first request (its claim about $4.17), then only the tool-less final
    # request the ceiling still covers — never eight
    assert len(sent) == 2, [b.get("max_tokens") for b in sent]
    assert sent[0]["max_tokens"] == 4096 and sent[0].get("tools")
    assert not sent[1].get("tools") and 256 <= sent[1]["max_tokens"] < 1000
    leg = doc["legs"][0]
    assert (leg["status"], leg["stopped"], leg["finished"]) == ("complete", "cost_ceiling", False)
    assert leg["unread"] == 2
    # the record: never exact, an upper bound within the ceiling, and it says so
    assert doc["cost_exact"] is False
    assert 4.1 < doc["cost_bound_usd"] <= 5.0 + 1e-9
    assert leg["cost_bound_usd"] == doc["cost_bound_usd"]
    assert any("an upper bound" in n for n in doc["notices"]), doc["notices"]
    assert result.exit_code == 2 and doc["degraded"], (result.exit_code, doc["degraded"])
    assert any("could not be read" in d or "unknown" in d for d in doc["degraded"])
    row = sqlite3.connect(orch_home / "ledger.db").execute(
        "select cost_bound_usd, seq from spend").fetchone()
    assert row == (pytest.approx(doc["cost_bound_usd"]), 2)


def test_prompt_tokens_true_is_no_count(orch, scripted_server):
    """Read as 1 token ``declared`` before: it is no count (``suspect``)."""
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="hi", usage={"prompt_tokens": True,
                                                        "completion_tokens": 5}))
    leg = orch.run_leg("m").leg
    assert leg["cost_source"] == "suspect" and leg["usage"]["input_tokens"] == 0
    assert any("input_tokens True is not a count" in n for n in leg["notes"])


def test_with_no_ceiling_the_unread_answer_is_still_an_upper_bound_not_exact(
        orch, scripted_server):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="hi", no_usage=True))
    doc = orch.run_leg("m").doc
    assert doc["cost_exact"] is False and doc["cost_usd"] == 0
    assert doc["cost_bound_usd"] > 0 and doc["legs"][0]["cost_source"] == "unknown"
    assert doc["exit_code"] == 0  # no budget was set: the answer stands, the total says so
