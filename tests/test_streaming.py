"""Every leg streams: the request asks for a stream with its usage, the ledger keeps the
streamed usage (or the marked estimate when none came), tool calls survive the stream, each
piece of text is a ``LegText`` event in order, and an interrupt ends a stream with its row.
In-process against the scripted server over HTTP through litellm; the one subprocess test
(test_stream_cli.py) proves a single-leg ``orch fanout`` prints text before its leg ends."""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from orchestrator import events
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]


def ledger(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


def run_events(prompt: str, models: str, interrupt_at_text: int | None = None):
    """A fanout through the application core (what the CLI, the daemon and MCP run): the
    events it emitted and its document."""
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Fanout
    from orchestrator.app.start import start

    got: list = []
    with prepare(Fanout(prompt=prompt, models=models, tools="none",
                        validate_models=False)) as prepared:
        prepared.watch_text = True  # a face that shows the text as it arrives
        handle = start(prepared)

        def seen(event):
            got.append(event)
            texts = sum(isinstance(e, events.LegText) for e in got)
            if interrupt_at_text is not None and texts == interrupt_at_text:
                handle.interrupt(2)

        doc = anyio.run(handle.drive, seen)
    return got, doc


def test_the_request_asks_for_a_stream_and_the_row_holds_the_streamed_usage(
        orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="streamed answer here",
                                      usage={"prompt_tokens": 123, "completion_tokens": 45}))
    run = orch.run_leg("m", "q", streamed=True)
    body = run.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert run.leg["status"] == "complete" and run.leg["answer"] == "streamed answer here"
    row = ledger(orch_home)[0]
    assert (row["input_tokens"], row["output_tokens"]) == (123, 45)
    assert row["cost_source"] == "declared"
    assert row["cost_usd"] == pytest.approx((123 + 45) * 1000 / 1e6)
    assert run.doc["cost_exact"] is True and not run.leg.get("usage_estimated")
    assert "".join(t for _, t in run.texts) == "streamed answer here"


def test_a_leg_nobody_watches_is_read_whole(orch, scripted_server, orch_home):
    """Streaming costs CPU per chunk in litellm (docs/performance.md): a run whose text no
    face shows (--json, a pipe, MCP) asks for no stream, and its row is as exact."""
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("m", Reply(text="whole answer",
                                      usage={"prompt_tokens": 12, "completion_tokens": 3}))
    run = orch.run_leg("m", "q")
    assert "stream" not in run.bodies[0] and "stream_options" not in run.bodies[0]
    assert run.leg["answer"] == "whole answer" and run.texts == []
    row = ledger(orch_home)[0]
    assert (row["input_tokens"], row["output_tokens"]) == (12, 3)


def test_a_stream_with_no_usage_falls_back_to_the_marked_estimate(orch, scripted_server,
                                                                    orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("m", Reply(text="an answer with no usage", no_usage=True))
    run = orch.run_leg("m", "q", streamed=True)
    assert run.bodies[0]["stream_options"] == {"include_usage": True}  # asked, not given
    leg = run.leg
    assert leg["status"] == "complete" and leg["answer"] == "an answer with no usage"
    # not litellm's tokenizer count passed off as the provider's: no usage, an estimate
    assert leg["usage_reported"] == {"input_tokens": 0, "output_tokens": 0,
                                     "reasoning_tokens": 0, "cached_tokens": 0}
    assert leg["usage_estimated"] is True and leg["usage"]["output_tokens"] > 0
    assert leg["notes"][0].startswith("the provider reported no usage")
    row = ledger(orch_home)[0]
    assert row["cost_source"] == "unknown" and row["cost_usd"] is None
    assert (row["input_tokens"], row["output_tokens"]) == (0, 0)
    assert run.doc["cost_exact"] is False


@pytest.mark.parametrize("no_usage", [False, True], ids=["usage", "no-usage"])
def test_a_provider_that_ignores_stream_is_read_whole_as_if_unwatched(
        orch, scripted_server, orch_home, no_usage):
    """A watched leg asks for a stream; a provider that answers with one plain JSON completion
    instead is read whole: the same answer, usage and dollars in the ledger as the same leg
    nobody watched (its text handed on at once), not a ``bad_response``."""
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    usage = {"prompt_tokens": 77, "completion_tokens": 9}
    scripted_server.script("m", Reply(text="a whole answer", usage=usage, no_usage=no_usage,
                                      ignores_stream=True))
    watched = orch.run_leg("m", "q", streamed=True)
    unwatched = orch.run_leg("m", "q")
    assert watched.bodies[0]["stream"] is True  # asked for, and not given
    assert "stream" not in unwatched.bodies[0]
    for run in (watched, unwatched):
        assert run.leg["status"] == "complete" and run.leg["answer"] == "a whole answer"
    assert "".join(t for _, t in watched.texts) == "a whole answer"
    keep = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost_usd",
            "cost_source", "status", "model")
    rows = ledger(orch_home)
    assert len(rows) == 2
    assert {k: rows[0][k] for k in keep} == {k: rows[1][k] for k in keep}
    if no_usage:  # the fallback holds: no usage, the marked estimate, an unknown cost
        assert rows[0]["cost_source"] == "unknown" and rows[0]["cost_usd"] is None
        assert watched.leg["usage_estimated"] is True
        assert watched.leg["usage"] == unwatched.leg["usage"]
    else:
        assert (rows[0]["input_tokens"], rows[0]["output_tokens"]) == (77, 9)
        assert rows[0]["cost_usd"] == pytest.approx((77 + 9) * 1000 / 1e6)
    assert watched.doc["cost_exact"] == unwatched.doc["cost_exact"]


def test_a_streamed_tool_call_runs_and_the_answer_follows(orch, scripted_server):
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class Adder:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("add", "Add two numbers.",
                         {"type": "object", "properties": {"a": {"type": "integer"},
                                                           "b": {"type": "integer"}}},
                         lambda a, b: str(a + b))]

    orch.provider()
    scripted_server.script(
        "m", Reply(text="Let me add.", tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 40}}],
                   usage={"prompt_tokens": 10, "completion_tokens": 6}),
        Reply(text="The sum is 42.", usage={"prompt_tokens": 20, "completion_tokens": 5}))
    run = orch.run_leg("m", "add 2 and 40", plugins=[("adder", Adder())], streamed=True)
    assert run.leg["status"] == "complete" and run.leg["answer"] == "The sum is 42."
    second = run.bodies[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": second[-2]["tool_calls"][0]["id"],
                          "content": "42"}
    call = second[-2]["tool_calls"][0]["function"]
    assert call["name"] == "add" and json.loads(call["arguments"]) == {"a": 2, "b": 40}
    assert run.leg["usage"]["input_tokens"] == 30 and run.leg["usage"]["output_tokens"] == 11


def test_the_deltas_are_text_events_in_order_and_make_the_answer(orch, scripted_server):
    orch.provider()
    text = "One two three, four five six.\nSeven eight."
    scripted_server.script("a", Reply(text=text))
    scripted_server.script("b", Reply(text="Other leg answers."))
    got, doc = run_events("q", "scripted/a,scripted/b")
    by_leg: dict[str, list[str]] = {}
    for e in got:
        if isinstance(e, events.LegText):
            by_leg.setdefault(e.leg_id, []).append(e.text)
    answers = {leg["leg_id"]: leg["answer"] for leg in doc["legs"]}
    assert set(by_leg) == set(answers)
    for leg_id, pieces in by_leg.items():
        assert "".join(pieces) == answers[leg_id]
    a = next(leg["leg_id"] for leg in doc["legs"] if leg["model"] == "scripted/a")
    assert len(by_leg[a]) >= 6  # arrived in pieces, not as one
    # every text event comes after its leg started and before it ended
    order = [(type(e).__name__, getattr(e, "leg_id", None) or (getattr(e, "leg", None) or {})
              .get("leg_id")) for e in got]
    for leg_id in by_leg:
        started = order.index(("LegStarted", leg_id))
        ended = order.index(("LegEnded", leg_id))
        texts = [i for i, o in enumerate(order) if o == ("LegText", leg_id)]
        assert started < min(texts) and max(texts) < ended
    # the daemon's client and `orch mcp` read events as JSON: the text event survives it
    wire = [events.from_dict(json.loads(json.dumps(e.to_dict()))) for e in got]
    assert wire == got
    assert events.from_dict({"type": "text", "leg_id": "x", "text": "hi"}) == \
        events.LegText("x", "hi")


def test_an_interrupt_ends_a_stream_mid_flight_with_its_ledger_row(orch, scripted_server,
                                                                    orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    words = " ".join(f"w{i}" for i in range(200))
    scripted_server.script("m", Reply(text=words, chunk_delay=0.05))
    got, doc = run_events("q", "scripted/m", interrupt_at_text=2)
    leg = doc["legs"][0]
    assert doc["signal"] == 2 and doc["exit_code"] == 130
    assert leg["status"] == "aborted"
    streamed = "".join(e.text for e in got if isinstance(e, events.LegText))
    assert streamed and len(streamed) < len(words)  # it stopped mid-stream
    rows = ledger(orch_home)
    assert [(r["leg_id"], r["status"]) for r in rows] == [(leg["leg_id"], "aborted")]
    # the server saw the client leave before the answer's end
    assert scripted_server.requests[0].status is None or \
        scripted_server.requests[0].duration < 200 * 0.05


def test_the_one_call_to_the_wire_streams():
    """Every chat request a leg sends goes through ``Server.complete`` (the only
    ``acompletion`` call outside the daemon's offline warm-up), whose arguments ask for a
    stream with usage when someone watches: a new path that calls litellm itself fails here."""
    calls = []
    for folder in ("orchestrator", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            if "testing" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                        node.func, "id", None)) in ("acompletion", "completion"):
                    calls.append(str(path.relative_to(ROOT)))
    assert sorted(calls) == ["orchestrator/daemon/server.py", "orchestrator/models/server.py"]
    source = (ROOT / "orchestrator/models/server.py").read_text()
    assert "answer = await streamed.read(answer, kwargs[\"messages\"], on_text)" in source
    assert "kwargs.update(STREAM_KWARGS)" in source


def test_call_kwargs_stream_whatever_the_params_say(orch):
    from orchestrator import runtime
    from orchestrator.intake import Policy, admit
    from orchestrator.models.resolve import resolve_all
    from orchestrator.models.server import Server
    from orchestrator.plugin_host.plugins import load
    from orchestrator.request import Request

    orch.provider()
    model = resolve_all(["scripted/m"], runtime.config(), load(enabled=False))[0]
    request = Request(model="scripted/m", messages=[{"role": "user", "content": "q"}],
                      params={"stream": False, "temperature": 0.1})
    kwargs = Server().call_kwargs(model, admit(request, Policy()), stream=True)
    assert kwargs["stream"] is True and kwargs["stream_options"] == {"include_usage": True}
    assert kwargs["temperature"] == 0.1
    # nobody watches: read whole, whatever the params say
    request = Request(model="scripted/m", messages=[{"role": "user", "content": "q"}],
                      params={"stream": True, "stream_options": {"include_usage": True}})
    kwargs = Server().call_kwargs(model, admit(request, Policy()))
    assert "stream" not in kwargs and "stream_options" not in kwargs
