"""A step the provider rejected for its ``tools`` is sent once more in text mode. Each request
that reaches the wire passes each before_request hook exactly once, on a request built fresh
from the conversation; the resend says so (``request.attempt == 2``), so a plugin that acts
once per step gives the same change again, and a claim made for the rejected request is
replaced, never added to. Before, the resend was indistinguishable from a new step: the turn
budget, having given its note to the rejected request, left it off the request that was
answered."""

from __future__ import annotations

from orch_plugins.text_tools import TEXT_PROTOCOL_HEAD
from test_text_tools import Files

from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply

READ = {"name": "read", "arguments": {"path": "a.py"}}


class Counter:
    """Counts what a plugin hears: each request it is asked about, each answer."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []  # (step, attempt)
        self.answered = 0
        self.accounts: list[dict] = []

    @hookimpl
    def before_request(self, leg, request):
        self.sent.append((request.step, request.attempt))

    @hookimpl(wrapper=True, tryfirst=True)
    def after_response(self, leg, request, response):
        self.answered += 1
        return (yield)


class Account:
    """The run's account (orchestrator/account) right after the cost ceiling claimed for each
    request: this wrapper is registered after the ceiling's, at the same priority, so it
    runs outside it."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    @hookimpl(wrapper=True, tryfirst=True)
    def before_request(self, leg, request):
        final = yield
        account = leg.account
        self.seen.append({"claims": dict(account.claims),
                          "committed": account.committed(),
                          "spent": leg.record.cost_usd or 0.0})
        return final


def test_a_resent_step_passes_each_hook_once_and_keeps_its_notes(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    scripted_server.script(
        "m",
        # steps 1 and 2 natively: 300 + 200 of a 1000-token turn budget, so step 3 is due
        # the 50% note (and one more step still fits: no final request yet)
        Reply(tool_calls=[READ], usage={"prompt_tokens": 280, "completion_tokens": 20}),
        Reply(tool_calls=[READ], usage={"prompt_tokens": 190, "completion_tokens": 10}),
        # step 3 reaches a deployment without tool calling (a router's other backend)
        Reply(status=400, error_message="this model does not support tool calls"),
        Reply(text="a.py holds main()", usage={"prompt_tokens": 100, "completion_tokens": 5}))
    counter, account = Counter(), Account()
    run = orch.run_leg("m", "What is in a.py?",
                       plugins=[("files", Files()), ("counter", counter),
                                ("account", account)],
                       options={"plugins": True, "leg_tokens": 1000, "max_cost": 1.0})
    leg = run.leg
    assert leg["status"] == "complete" and leg["answer"] == "a.py holds main()", leg
    bodies = run.bodies
    assert len(bodies) == 4 and leg["requests"] == 4
    assert "tools" in bodies[2] and "tools" not in bodies[3]
    assert TEXT_PROTOCOL_HEAD in bodies[3]["messages"][0]["content"]

    # every request on the wire passed before_request once; the resend says it is one
    assert counter.sent == [(1, 1), (2, 1), (3, 1), (3, 2)]
    assert counter.answered == 3  # the rejected request had no answer to hear about

    # the step's turn-budget note went out with the request that was answered, too
    # (a 300-token first step of a 1000-token budget: one tool step left before the final
    # request from step 2 on, so the notes due by steps left come in one, turn_budget.py)
    def notes(body):
        return [m["content"] for m in body["messages"]
                if str(m.get("content") or "").startswith("Budget note:")]
    assert len(notes(bodies[2])) == 1 and "1 more step with tools fit" in notes(bodies[2])[0]
    assert notes(bodies[3]) == notes(bodies[2])  # the resend carries it once, not twice
    assert leg["turn_budget"]["notes"] == [50, 75, 90]

    # the running account: one open claim for the leg at every send, the resend's claim
    # replacing the rejected request's, never added to it
    assert len(account.seen) == 4
    for seen in account.seen:
        assert list(seen["claims"]) == [leg["leg_id"]]
        (claim,) = seen["claims"].values()
        assert abs(seen["committed"] - (seen["spent"] + claim)) < 1e-12
    assert account.seen[3]["spent"] == account.seen[2]["spent"]  # the 400 billed nothing
    assert abs(leg["cost_usd"] - (280 + 190 + 100) * 1e-6 - (20 + 10 + 5) * 2e-6) < 1e-12
