"""The application core: a request per thing orch runs, ``prepare`` (every check before
spend; models, the variables a run reads, its run id and account), ``start`` (events, the
document), and the faces as adapters: `orch fanout`/`orch council run` and `orch mcp`'s
tools build the same request for the same inputs and reach the same ``prepare``; a prepared
run travels to a daemon and back unchanged. In-process and fast: the real CLI (CliRunner),
the real MCP tool handler, the scripted server over HTTP."""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


class FakeSession:
    """What the MCP tool handler needs of a client session: somewhere for progress."""

    def __init__(self) -> None:
        self.progress: list[str | None] = []

    async def report_progress(self, value, total, message) -> None:
        self.progress.append(message)


@pytest.fixture
def seen(monkeypatch):
    """Every request ``prepare`` is called with (the real one still runs)."""
    from orchestrator.app import prepare as prepare_mod

    calls: list = []
    real = prepare_mod.prepare

    def spy(request):
        calls.append(request)
        return real(request)

    monkeypatch.setattr(prepare_mod, "prepare", spy)
    return calls


def mcp(tool: str, args: dict):
    from orchestrator.mcp_server.server import Jobs, call_tool

    async def go():
        return await call_tool(tool, args, FakeSession(), Jobs())

    return anyio.run(go)


@pytest.mark.parametrize("flags, args", [
    (["-m", "scripted/a,scripted/b", "--chair", "scripted/c", "--tools", "none",
      "--timeout", "5", "--tag", "t1"],
     {"models": ["scripted/a", "scripted/b"], "chair": "scripted/c", "tools": "none",
      "timeout_minutes": 5, "tag": "t1"}),
    (["-m", "scripted/a,scripted/b", "--rounds", "2", "--peers", "1", "--tools", "read",
      "--max-cost", "3"],
     {"models": ["scripted/a", "scripted/b"], "rounds": 2, "peers": 1, "tools": "read",
      "max_cost": 3}),
    (["-m", "scripted/a,scripted/b", "--chair", "scripted/c", "--synthesis", "structured",
      "--aggregate", "vote", "--tools", "none"],
     {"models": ["scripted/a", "scripted/b"], "chair": "scripted/c", "synthesis": "structured",
      "aggregate": "vote", "tools": "none"}),
])
def test_mcp_and_the_cli_reach_the_same_prepare_for_the_same_inputs(orch, scripted_server,
                                                                    seen, flags, args):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    for name in "abc":
        scripted_server.script(name, *[Reply(text='{"answer": "x", "vote": null}')] * 4)
    result = CliRunner().invoke(cli, ["fanout", "-p", "the same question", "--json", *flags])
    assert result.exit_code in (0, 2), result.output
    tool = mcp("fanout", {"prompt": "the same question", **args})
    assert not tool.is_error, tool.content[0].text
    cli_request, mcp_request = seen
    assert cli_request == mcp_request  # one request type, equal field by field
    assert json.loads(result.stdout)["status"] == tool.structured_content["status"]


def test_council_from_both_faces_is_one_request(orch, scripted_server, seen, tmp_path,
                                                monkeypatch):
    orch.provider()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text("context for the seats\n")
    scripted_server.default = Reply(status=500)  # the runs fail; the requests are compared
    CliRunner().invoke(cli, ["council", "run", "-p", "review it", "-m",
                             "scripted/a,scripted/b", "--chair", "scripted/c", "-c",
                             "notes.md", "--tools", "none", "--json"])
    mcp("council_run", {"prompt": "review it", "models": ["scripted/a", "scripted/b"],
                        "chair": "scripted/c", "context": ["notes.md"], "tools": "none"})
    assert len(seen) == 2 and seen[0] == seen[1]


@pytest.mark.parametrize("values, words", [
    ({"peers": 2}, "--peers only applies to a deliberation"),
    ({"retry_failed": "w1", "rounds": 3}, "drop --rounds"),
    ({"retry_failed": "w1", "models": "p/a"}, "drop --models"),
    ({"continue_wave": "last", "council": "c"}, "drop --council"),
    ({"continue_wave": "last", "rounds": 2}, "drop --rounds"),
    ({"continue_wave": "last", "retry_failed": "w1"}, "either --retry-failed or --continue"),
])
def test_the_combinations_that_make_no_run_are_refused_by_the_one_builder(values, words):
    from orchestrator.app import requests
    from orchestrator.errors import UsageProblem

    with pytest.raises(UsageProblem, match=words):
        requests.fanout(prompt="x", **values)


def test_the_mcp_tool_says_the_builders_refusal_in_its_own_words(orch):
    result = mcp("fanout", {"prompt": "x", "models": ["scripted/a"], "peers": 2})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("fanout: peers only applies to a deliberation; add rounds"), text


def test_a_prepared_run_knows_its_models_keys_run_id_and_account(orch, monkeypatch):
    """Including the models of a retried wave and a configured chair, and a plugin's
    declared variable: exactly these are captured, no other key of the environment."""
    from orchestrator.app.declared import RECORD
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Council, Fanout

    orch.provider(api_key_env="SEAT_KEY")
    orch.provider("judges", api_key_env="CHAIR_KEY")
    orch.config(defaults={"chair": "judges/c"})
    monkeypatch.setenv("SEAT_KEY", "sk-seat-0123456789abcdef")
    monkeypatch.setenv("CHAIR_KEY", "sk-chair-0123456789abcdef")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    with prepare(Council(prompt="review", models="scripted/a,scripted/b", tools="none",
                         validate_models=False, budgets={"max_cost": 2.0})) as council:
        assert council.kind == "council" and council.run_id
        assert [m.name for m in council.models] == ["scripted/a", "scripted/b", "judges/c"]
        assert council.key_vars == {"SEAT_KEY", "CHAIR_KEY", *RECORD}  # and where rows go
        keys = {k: v for k, v in council.keys.items() if k not in RECORD}
        assert keys == {"SEAT_KEY": "sk-seat-0123456789abcdef",
                        "CHAIR_KEY": "sk-chair-0123456789abcdef"}
        assert council.account.run_id == council.run_id
        assert council.account.ceilings == {"max_cost": 2.0}
    with prepare(Fanout(prompt="q", models="scripted/a", tools="none",
                        validate_models=False)) as wave:
        assert wave.kind == "wave" and wave.plan.wave_id == wave.run_id
        assert wave.key_vars == {"SEAT_KEY", *RECORD} and "GITHUB_TOKEN" not in wave.keys


def test_a_prepared_run_comes_back_from_the_wire_equal(orch, tmp_path):
    """What the client sends the daemon: every kind rebuilt field for field, the key values
    only beside it and only the declared ones kept."""
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Council, Fanout
    from orchestrator.app.wire import from_wire, to_wire

    orch.provider()
    for request in (Fanout(prompt="q", models="scripted/a,scripted/b", chair="scripted/c",
                           tools="none", validate_models=False, tag="t"),
                    Fanout(prompt="q", models="scripted/a,scripted/b", chair="scripted/c",
                           synthesis="structured", aggregate="vote", tools="none",
                           validate_models=False),
                    Fanout(prompt="q", models="scripted/a,scripted/b", rounds=3, peers=1,
                           tools="none", validate_models=False),
                    Council(prompt="r", models="scripted/a,scripted/b", chair="scripted/c",
                            tools="none", validate_models=False)):
        with prepare(request) as prepared:
            wire = json.loads(json.dumps(to_wire(prepared)))  # plain JSON all the way
            back = from_wire(wire, {"NOT_DECLARED": "v"})
            assert to_wire(back) == to_wire(prepared)
            assert back.request == prepared.request and dict(back.keys) == {}
            assert back.plan == prepared.plan
            if getattr(request, "synthesis", None):  # what the run ends on travels with it
                assert back.plan.synthesis == "structured"
                assert back.plan.options["aggregate"] == "vote"


def test_start_streams_events_and_ends_with_the_document(orch, scripted_server):
    from orchestrator import events
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Fanout
    from orchestrator.app.start import start

    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.script("a", Reply(text="A", usage={"prompt_tokens": 10,
                                                       "completion_tokens": 5}))
    scripted_server.script("b", Reply(status=500))
    got: list = []
    with prepare(Fanout(prompt="q", models="scripted/a,scripted/b", tools="none",
                        validate_models=False)) as prepared:
        handle = start(prepared)
        doc = anyio.run(handle.drive, got.append)
    kinds = [type(e).__name__ for e in got]
    assert kinds.count("LegStarted") == 2 and kinds.count("LegEnded") == 2
    assert kinds[-1] == "Ended" and got[-1].document == doc and got[-1].exit_code == 2
    ended = {e.leg["model"]: e.leg for e in got if isinstance(e, events.LegEnded)}
    assert ended["scripted/a"]["cost_usd"] == pytest.approx(0.015)  # leg ended with its cost
    assert ended["scripted/b"]["status"] == "error"
    # every event survives the wire
    assert [events.from_dict(json.loads(json.dumps(e.to_dict()))) for e in got] == got


def test_an_interrupt_before_the_run_begins_ends_it_as_a_signal_would(orch, scripted_server):
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Fanout
    from orchestrator.app.start import start

    orch.provider()
    with prepare(Fanout(prompt="q", models="scripted/a", tools="none",
                        validate_models=False)) as prepared:
        handle = start(prepared)
        handle.interrupt(2)
        doc = anyio.run(handle.drive)
    assert doc["signal"] == 2 and doc["exit_code"] == 130
    assert scripted_server.requests == []
