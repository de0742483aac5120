"""The hook API on the wire: isolation, refusal, ordering, wrappers, async hooks.

Every test runs a real leg in-process (the testing kit) against the scripted server over
HTTP, and checks what reached the server, the leg's metadata.json and the SQLite ledger.
"""

from __future__ import annotations

import json
import sqlite3

import anyio
import pytest
import structlog.testing

from orchestrator.errors import OrchError, Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool


def tagged(request, label: str):
    """``request`` with `` [label]`` appended to its last message: a visible, ordered mark."""
    last = request.messages[-1]
    return request.evolve(messages=[*request.messages[:-1],
                                    {**last, "content": f"{last['content']} [{label}]"}])


def last_content(body: dict) -> str:
    return body["messages"][-1]["content"]


def tag_hook(**options):
    """A before_request implementation that tags the request with ``self.label``."""
    @hookimpl(**options)
    def before_request(self, leg, request):
        return tagged(request, self.label)
    return before_request


class Tagger:
    before_request = tag_hook()

    def __init__(self, label: str) -> None:
        self.label = label


class FirstTagger(Tagger):
    before_request = tag_hook(tryfirst=True)


class LastTagger(Tagger):
    before_request = tag_hook(trylast=True)


class Echo:
    @hookimpl
    def register_tools(self, leg):
        return [Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda: "echoed")]


@pytest.fixture
def logs():
    """Log events the leg emits (``plugin_error`` is the once-per-leg warning)."""
    from orchestrator.runtime import configure_logging

    configure_logging()  # first, so capturing is not undone by the engine's own set-up
    with structlog.testing.capture_logs() as events:
        yield events


def metadata(orch_home, leg: dict) -> dict:
    return json.loads((orch_home / "runs" / leg["leg_id"] / "metadata.json").read_text())


def ledger(orch_home) -> list[tuple]:
    con = sqlite3.connect(orch_home / "ledger.db")
    try:
        return con.execute("select status, reason from spend order by id").fetchall()
    finally:
        con.close()


# -- isolation -------------------------------------------------------------------------------

class Faulty:
    @hookimpl
    def before_request(self, leg, request):
        raise RuntimeError("boom in faulty")


def test_a_raising_plugin_is_skipped_recorded_and_warned_once_per_leg(
        orch, scripted_server, orch_home, logs):
    scripted_server.script("m", Reply(tool_calls=[{"name": "echo", "arguments": {}}]),
                           Reply(text="done"))
    run = orch.run_leg("m", "hi", plugins=[("echo", Echo()), ("faulty", Faulty()),
                                           ("tagger", Tagger("ok"))])
    # the leg went on; the other plugin's change is on the wire, the faulty one's is not
    assert run.leg["status"] == "complete" and run.leg["answer"] == "done"
    assert [last_content(b) for b in run.bodies] == ["hi [ok]", "echoed [ok]"]
    meta = metadata(orch_home, run.leg)
    assert meta["plugin_errors"] == [
        {"plugin": "faulty", "hook": "before_request", "error": "RuntimeError: boom in faulty"}
    ] * 2  # both requests
    warnings = [e for e in logs if e["event"] == "plugin_error"]
    assert [(w["plugin"], w["hook"]) for w in warnings] == [("faulty", "before_request")]


def test_without_other_plugins_a_raising_one_leaves_the_request_exactly_as_built(
        orch, scripted_server):
    scripted_server.script("m", Reply(text="a"), Reply(text="b"))
    bare = orch.run_leg("m", "same prompt", builtins=False)
    faulty = orch.run_leg("m", "same prompt", builtins=False, plugins=[("faulty", Faulty())])
    assert faulty.leg["status"] == "complete"
    assert faulty.bodies[0]["messages"] == bare.bodies[0]["messages"]
    assert faulty.bodies[0].get("tools") == bare.bodies[0].get("tools")
    assert [e["plugin"] for e in faulty.leg["plugin_errors"]] == ["faulty"]


def test_each_leg_warns_once_for_its_own_failures(orch, scripted_server, logs):
    run = orch.run_wave(["a", "b"], plugins=[("faulty", Faulty())])
    assert [leg["status"] for leg in run.legs] == ["complete", "complete"]
    warned = sorted(e["leg_id"] for e in logs if e["event"] == "plugin_error")
    assert warned == sorted(leg["leg_id"] for leg in run.legs)


# -- refusal ---------------------------------------------------------------------------------

class Closing:
    """A wrapper that notes whether it was closed when a later plugin refused."""

    closed = False

    @hookimpl(wrapper=True)
    def before_request(self, leg, request):
        try:
            return (yield)
        finally:
            Closing.closed = True


class NoFridays:
    @hookimpl
    def before_request(self, leg, request):
        raise Refusal("NO_FRIDAYS", "no deploys on a Friday")


def test_a_refusal_sends_nothing_and_the_leg_and_ledger_say_refused(
        orch, scripted_server, orch_home):
    scripted_server.script("m", Reply(text="never"))
    run = orch.run_leg("m", "deploy?", plugins=[("closing", Closing()),
                                               ("no-fridays", NoFridays())])
    assert scripted_server.requests == [] and run.bodies == []
    assert run.leg["status"] == "refused"
    assert run.leg["reason"] == "NO_FRIDAYS: no deploys on a Friday"
    assert metadata(orch_home, run.leg)["status"] == "refused"
    assert run.leg["plugin_errors"] == []  # a refusal is deliberate, not an error
    assert ledger(orch_home) == [("refused", "NO_FRIDAYS: no deploys on a Friday")]
    assert Closing.closed
    assert run.doc["status"] == "error"


def test_a_refusal_on_a_later_step_stops_the_leg_there(orch, scripted_server, orch_home):
    class OneStep:
        @hookimpl
        def before_request(self, leg, request):
            if request.step > 1:
                raise Refusal("ONE_STEP", f"step {request.step} is one too many")

    scripted_server.script("m", Reply(tool_calls=[{"name": "echo", "arguments": {}}]),
                           Reply(text="never sent"))
    run = orch.run_leg("m", plugins=[("echo", Echo()), ("one-step", OneStep())])
    assert len(run.bodies) == 1
    assert run.leg["reason"].startswith("ONE_STEP:") and run.leg["steps"] == 2
    assert ledger(orch_home) == [("refused", "ONE_STEP: step 2 is one too many")]


# -- ordering --------------------------------------------------------------------------------

class Temperature:
    """A third party's sampling choice, a plain (not trylast) implementation."""

    @hookimpl
    def before_request(self, leg, request):
        return request.evolve(params={**request.params, "temperature": 0.9})


def test_a_third_party_before_request_wins_over_the_built_in_trylast_default(
        orch, scripted_server):
    """The built-in tiers plugin pins temperature 0.2 for small models, as a default: it
    runs last (trylast), sees the third party's choice and leaves it on the wire."""
    scripted_server.script("qwen3-4b", Reply(text="a"), Reply(text="b"))
    default = orch.run_leg("qwen3-4b")
    chosen = orch.run_leg("qwen3-4b", plugins=[("temperature", Temperature())])
    assert default.leg["tier"] == "minimal" and default.bodies[0]["temperature"] == 0.2
    assert chosen.bodies[0]["temperature"] == 0.9
    assert "sampling_pinned" not in chosen.leg


def test_call_order_is_tryfirst_then_plain_newest_first_then_trylast(orch, scripted_server):
    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", plugins=[("last", LastTagger("last")), ("a", Tagger("a")),
                                           ("first", FirstTagger("first")), ("b", Tagger("b"))])
    assert last_content(run.bodies[0]) == "hi [first] [b] [a] [last]"


def test_a_wrapper_sees_the_final_request_and_may_replace_it(orch, scripted_server):
    seen = {}

    class Wrapper:  # registered first, yet around every plain implementation
        @hookimpl(wrapper=True)
        def before_request(self, leg, request):
            seen["before"] = last_content(request.to_dict())
            final = yield
            seen["after"] = last_content(final.to_dict())
            return tagged(final, "wrapper")

    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", plugins=[("wrapper", Wrapper()), ("late", LastTagger("late")),
                                           ("a", Tagger("a"))])
    assert seen == {"before": "hi", "after": "hi [a] [late]"}
    assert last_content(run.bodies[0]) == "hi [a] [late] [wrapper]"


def test_a_wrapper_that_never_yields_is_isolated(orch, scripted_server):
    class NoYield:
        @hookimpl(wrapper=True)
        def before_request(self, leg, request):
            return
            yield  # noqa: B901 - a generator that ends before its yield

    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", plugins=[("no-yield", NoYield()), ("a", Tagger("a"))])
    assert last_content(run.bodies[0]) == "hi [a]"
    assert run.leg["plugin_errors"] == [{"plugin": "no-yield", "hook": "before_request",
                                         "error": "RuntimeError: a wrapper must yield "
                                                  "exactly once"}]


# -- async -----------------------------------------------------------------------------------

def test_awaitables_returned_by_hooks_are_awaited(orch, scripted_server):
    events = []

    class Async:
        @hookimpl
        async def before_request(self, leg, request):
            await anyio.sleep(0.01)  # e.g. asking a policy service
            return tagged(request, "async")

        @hookimpl
        def after_response(self, leg, request, response):
            async def later():
                await anyio.sleep(0)
                return response.evolve(text=response.text.upper())
            return later()

        @hookimpl
        async def step_end(self, leg, step):
            await anyio.sleep(0)
            events.append(("step_end", step["step"]))

        @hookimpl
        async def leg_end(self, leg, record):
            events.append(("leg_end", record.status))

    scripted_server.script("m", Reply(text="quiet"))
    run = orch.run_leg("m", "hi", plugins=[("async", Async())])
    assert last_content(run.bodies[0]) == "hi [async]"
    assert run.leg["answer"] == "QUIET"
    assert events == [("step_end", 1), ("leg_end", "complete")]
    assert run.leg["plugin_errors"] == []


def test_an_awaitable_from_a_synchronous_hook_is_an_isolated_error(orch, scripted_server):
    class AsyncPrompt:
        @hookimpl
        async def system_prompt(self, leg):
            return "never used"

    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", builtins=False, plugins=[("async-prompt", AsyncPrompt())])
    assert [m["role"] for m in run.bodies[0]["messages"]] == ["user"]
    assert run.leg["plugin_errors"] == [{
        "plugin": "async-prompt", "hook": "system_prompt",
        "error": "TypeError: system_prompt must answer synchronously, not with an awaitable"}]


# -- leg and wave life cycle -----------------------------------------------------------------

def test_failures_after_the_fact_never_touch_the_leg_or_the_wave(orch, scripted_server,
                                                                 orch_home):
    class Grumpy:
        @hookimpl
        def leg_end(self, leg, record):
            raise Refusal("TOO_LATE", "nothing left to refuse")

        @hookimpl
        def wave_end(self, wave):
            raise OrchError("wave_end cannot stop anything")

    class Crashy:
        @hookimpl
        def leg_end(self, leg, record):
            raise OrchError("nor can leg_end")

    scripted_server.script("m", Reply(text="fine"))
    run = orch.run_leg("m", plugins=[("grumpy", Grumpy()), ("crashy", Crashy())])
    assert run.doc["status"] == "complete" and run.leg["status"] == "complete"
    errors = metadata(orch_home, run.leg)["plugin_errors"]
    assert {(e["plugin"], e["hook"]) for e in errors} == {("grumpy", "leg_end"),
                                                          ("crashy", "leg_end")}
    assert any("plugin grumpy failed in wave_end" in n for n in run.doc["notices"])
    assert ledger(orch_home) == [("complete", None)]


def test_wave_start_may_stop_the_wave_before_any_request(orch, scripted_server):
    class NeedsServer:
        @hookimpl
        def wave_start(self, wave):
            raise OrchError("the local server would not start; see `orch doctor`")

    with pytest.raises(OrchError, match="local server would not start"):
        orch.run_leg("m", plugins=[("needs-server", NeedsServer())])
    assert scripted_server.requests == []


def test_leg_context_fields_and_set_reach_metadata(orch, scripted_server, orch_home, tmp_path):
    seen = {}

    class Inspector:
        @hookimpl
        def leg_start(self, leg):
            seen.update(leg_id=leg.leg_id, model=leg.model.name, kind=leg.kind,
                        briefing=leg.briefing, workspace=leg.workspace,
                        max_steps=leg.max_steps, cfg=leg.plugin_config("inspector"))
            leg.state["inspector"] = {"requests": 0}

        @hookimpl
        def before_request(self, leg, request):
            leg.state["inspector"]["requests"] += 1
            seen["step"] = leg.step

        @hookimpl
        def leg_end(self, leg, record):
            leg.set("inspector", leg.state["inspector"])
            leg.notice("inspected")

    orch.config(plugin_config={"inspector": {"depth": 2}})
    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "look", plugins=[("inspector", Inspector())], workspace=tmp_path,
                       max_steps=5)
    assert seen == {"leg_id": run.leg["leg_id"], "model": "scripted/m", "kind": "leg",
                    "briefing": "look", "workspace": tmp_path, "max_steps": 5,
                    "cfg": {"depth": 2}, "step": 1}
    meta = metadata(orch_home, run.leg)
    assert meta["inspector"] == {"requests": 1} and meta["notes"] == ["inspected"]
