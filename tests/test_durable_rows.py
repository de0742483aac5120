"""A billed answer is in the ledger before any hook sees it, for every kind of leg: a wave's
legs, its chair, a council's seats and a bench's trials all run the one leg loop, so each
gets the row by construction. A plugin's ``after_response`` hook reads the ledger."""

from __future__ import annotations

import pytest

from orchestrator.errors import LegError
from orchestrator.hookspecs import hookimpl
from orchestrator.ledger.in_flight import IN_FLIGHT
from orchestrator.testing.scripted_server import Reply


class Peek:
    """What the ledger holds for a leg at the moment its answer reaches the first hook."""

    def __init__(self, raise_at: int | None = None) -> None:
        self.seen: list[tuple] = []
        self.raise_at = raise_at

    @hookimpl(tryfirst=True)
    def after_response(self, leg, request, response):
        from orchestrator.ledger.spend import Ledger

        rows = [r for r in Ledger().rows(wave_id=leg.wave_id) if r["leg_id"] == leg.leg_id]
        self.seen.append((leg.kind, leg.step, [(r["seq"], r["status"], r["reason"],
                                                r["input_tokens"]) for r in rows]))
        if leg.step == self.raise_at:
            raise LegError("STOP", "a plugin ends the leg after a paid answer")
        return None


def listing(tokens: int) -> Reply:
    return Reply(tool_calls=[{"name": "list", "arguments": {"path": "."}}],
                 usage={"prompt_tokens": tokens, "completion_tokens": 1})


@pytest.mark.parametrize("kind", ["leg", "seat", "bench"])
def test_each_answer_is_in_the_ledger_before_any_hook_runs(orch, scripted_server, tmp_path,
                                                           kind):
    scripted_server.script("m", listing(100), listing(200),
                           Reply(text="done", usage={"prompt_tokens": 300,
                                                     "completion_tokens": 1}))
    scripted_server.script("chair", Reply(text="merged", usage={"prompt_tokens": 50,
                                                               "completion_tokens": 1}))
    peek = Peek()
    run = orch.run_wave(["m"], plugins=[("peek", peek)], kind=kind, workspace=tmp_path,
                        chair="chair")
    assert run.doc["status"] == "complete", run.doc
    assert peek.seen == [
        (kind, 1, [(1, "aborted", IN_FLIGHT, 100)]),
        (kind, 2, [(2, "aborted", IN_FLIGHT, 300)]),
        (kind, 3, [(3, "aborted", IN_FLIGHT, 600)]),
        ("chair", 1, [(1, "aborted", IN_FLIGHT, 50)]),
    ]
    from orchestrator.ledger.spend import Ledger

    rows = {r["kind"]: (r["seq"], r["status"], r["input_tokens"]) for r in Ledger().rows()}
    assert rows == {kind: (3, "complete", 600), "chair": (1, "complete", 50)}


def test_a_hook_that_ends_the_leg_after_a_paid_answer_keeps_it_once(orch, scripted_server,
                                                                   tmp_path):
    scripted_server.script("m", listing(100), listing(200))
    run = orch.run_wave(["m"], plugins=[("peek", Peek(raise_at=2))], workspace=tmp_path)
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("STOP")
    from orchestrator.ledger.spend import Ledger

    (row,) = Ledger().rows()
    assert (row["seq"], row["status"], row["input_tokens"]) == (2, "error", 300)
