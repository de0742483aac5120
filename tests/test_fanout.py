"""`orch fanout` end to end: real CLI, real HTTP to the scripted server, real SQLite ledger."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows

from orchestrator.cli import cli
from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply


def fanout(*args: str, input: str | None = None):
    """``orch fanout ARGS``: in-process, or through a warm daemon (the ``both_ways`` param)."""
    return invoke(["fanout", *args], input=input)


both_ways = pytest.mark.usefixtures("both_ways")  # every assertion holds both ways


@both_ways
def test_three_legs_run_concurrently_and_land_in_the_ledger(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for name, latency in (("a", 0.2), ("b", 0.6), ("c", 1.0)):
        scripted_server.script(name, Reply(text=f"answer from {name}", latency=latency,
                                           usage={"prompt_tokens": 100, "completion_tokens": 10,
                                                  "cached_tokens": 40, "reasoning_tokens": 3}))
    result = fanout("-m", "scripted/a,scripted/b,scripted/c", "-p", "Why?", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "complete" and doc["exit_code"] == 0
    assert [leg["answer"] for leg in doc["legs"]] == ["answer from a", "answer from b",
                                                      "answer from c"]
    # concurrency is shown by the server: all three were open at once
    assert scripted_server.peak_in_flight == 3
    leg = doc["legs"][0]
    assert leg["usage"] == {"input_tokens": 100, "output_tokens": 10, "reasoning_tokens": 3,
                            "cached_tokens": 40}
    assert leg["cost_source"] == "declared"
    assert leg["cost_usd"] == pytest.approx((100 * 1.0 + 10 * 2.0) / 1e6)
    assert doc["cost_exact"] is True
    assert doc["cost_usd"] == pytest.approx(3 * (100 + 20) / 1e6)
    rows = ledger_rows(orch_home)
    assert sorted(r["leg_id"] for r in rows) == sorted(leg["leg_id"] for leg in doc["legs"])
    assert {r["status"] for r in rows} == {"complete"}
    assert all(r["input_tokens"] == 100 and r["cached_tokens"] == 40 for r in rows)
    wave_json = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert wave_json["status"] == "complete"
    for leg in doc["legs"]:
        meta = json.loads((orch_home / "runs" / leg["leg_id"] / "metadata.json").read_text())
        assert meta["status"] == "complete"
        lines = (orch_home / "runs" / leg["leg_id"] / "conversation.jsonl").read_text()
        assert [json.loads(x)["type"] for x in lines.splitlines()] == ["request", "response"]


@both_ways
def test_a_failing_leg_gives_partial_and_exit_2_without_touching_the_others(
        orch, scripted_server, orch_home):
    orch.provider()
    scripted_server.script("good", Reply(text="fine"))
    scripted_server.script("bad", Reply(status=500, error_message="upstream exploded"))
    result = fanout("-m", "scripted/good,scripted/bad", "-p", "hi", "--json")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["status"] == "partial"
    good, bad = doc["legs"]
    assert good["status"] == "complete" and good["answer"] == "fine"
    assert bad["status"] == "error" and bad["reason"].startswith("server_error:")
    assert "upstream exploded" in bad["reason"]
    rows = ledger_rows(orch_home)
    assert sorted(r["status"] for r in rows) == ["complete", "error"]
    # the declared provider has no prices: cost is unknown, never guessed
    assert good["cost_usd"] is None and good["cost_source"] == "unknown"
    assert doc["cost_exact"] is False


@both_ways
def test_chair_gets_every_complete_answer_labelled_by_model(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="A says 42"))
    scripted_server.script("b", Reply(text="B says 41"))
    scripted_server.script("judge", Reply(text="Both near 42."))
    result = fanout("-m", "scripted/a,scripted/b", "--chair", "scripted/judge", "-p", "n?",
                    "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["chair"]["answer"] == "Both near 42." and doc["chair"]["kind"] == "chair"
    chair_body = scripted_server.requests_for("judge")[0].body
    packet = chair_body["messages"][-1]["content"]
    assert "### scripted/a" in packet and "A says 42" in packet and "B says 41" in packet


@both_ways
def test_human_output_has_each_answer_and_totals(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="the answer"))
    result = fanout("-m", "scripted/a", "-p", "q")
    assert result.exit_code == 0
    assert "== scripted/a" in result.stdout and "the answer" in result.stdout
    assert "wave " not in result.stdout.lower()  # the totals are said on stderr
    assert "orch: wave " in result.stderr and ": complete · 1 leg · " in result.stderr


@both_ways
def test_briefing_from_stdin_and_context_file(orch, scripted_server, tmp_path):
    orch.provider()
    ctx = tmp_path / "test_x.py"
    ctx.write_text("def test_x():\n    assert flaky()\n")
    result = fanout("-m", "scripted/a", "--context", str(ctx), "--json", input="Why flaky?")
    assert result.exit_code == 0, result.output
    content = scripted_server.requests_for("a")[0].body["messages"][-1]["content"]
    assert content.startswith("Why flaky?") and "assert flaky()" in content


@pytest.mark.parametrize("args, message", [
    (["-m", "scripted/a"], "briefing is empty"),
    (["-m", "nope", "-p", "x"], "has no provider"),
    (["-m", "scripted/a", "-p", "x", "--context", "/no/such/file"], "does not exist"),
    (["-m", "a/b,a/c,a/d", "-p", "x", "--max-legs", "2"], "more than --max-legs 2"),
    (["--council", "ghost", "-p", "x"], "no saved council"),
    (["-p", "x"], "no models given"),
])
@both_ways
@pytest.mark.refused_before_the_daemon  # prepared in the client: no word reaches it
def test_a_usage_mistake_is_one_line_exit_2(orch, args, message):
    orch.provider()
    result = fanout(*args, input="")
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1


@both_ways
def test_retry_failed_reruns_only_failed_legs(orch, scripted_server):
    orch.provider()
    scripted_server.script("ok", Reply(text="fine"))
    scripted_server.script("flaky", Reply(status=503), Reply(text="better now"))
    first = json.loads(fanout("-m", "scripted/ok,scripted/flaky", "-p", "x", "--json").stdout)
    assert first["status"] == "partial"
    result = fanout("--retry-failed", first["wave_id"], "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["retry_of"] == first["wave_id"]
    assert [leg["model"] for leg in doc["legs"]] == ["scripted/flaky"]
    assert doc["legs"][0]["answer"] == "better now"
    assert scripted_server.count("ok") == 1


def test_tool_calls_run_registered_tools_and_feed_results_back(orch, scripted_server):
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class Adder:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("add", "Add two integers.", {
                "type": "object", "properties": {"a": {"type": "integer"},
                                                 "b": {"type": "integer"}}},
                lambda a, b: str(a + b))]

    scripted_server.script("m", Reply(tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}]),
                           Reply(text="it is 5"))
    run = orch.run_leg("m", "2+3?", plugins=[("adder", Adder())])
    assert run.leg["status"] == "complete" and run.leg["answer"] == "it is 5"
    assert run.leg["roster"] == ["add"]
    second = run.bodies[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": second[-2]["tool_calls"][0]["id"],
                          "content": "5"}


def test_step_limit_sends_the_last_request_without_tools(orch, scripted_server):
    from orchestrator.engine.leg import FINAL_STEP_DIRECTIVE
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class Echo:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("echo", "Echo.", {"type": "object", "properties": {}}, lambda: "e")]

    scripted_server.script("loop", Reply(tool_calls=[{"name": "echo", "arguments": {}}]),
                           Reply(tool_calls=[{"name": "echo", "arguments": {}}]),
                           Reply(text=f"done. {FINAL_STEP_DIRECTIVE}"))
    run = orch.run_leg("loop", plugins=[("echo", Echo())], max_steps=3)
    assert len(run.bodies) == 3
    assert "tools" in run.bodies[0] and "tools" not in run.bodies[2]
    assert run.bodies[2]["messages"][-1]["content"] == FINAL_STEP_DIRECTIVE
    assert run.leg["status"] == "complete" and run.leg["stopped"] == "max_steps"
    assert FINAL_STEP_DIRECTIVE not in run.leg["answer"]


def test_status_rebuilds_a_wave_from_its_legs(orch, scripted_server, orch_home):
    orch.provider()
    run = orch.run_wave(["a", "b"])
    wave_dir = orch_home / "runs" / run.doc["wave_id"]
    (wave_dir / "wave.json").unlink()
    meta_path = orch_home / "runs" / f"{run.doc['wave_id']}-2" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta.update(status="running", billed=0)  # as if the process died mid-leg, before its
    meta_path.write_text(json.dumps(meta))  # answer was billed: no ledger row of it either
    with sqlite3.connect(orch_home / "ledger.db") as con:
        con.execute("delete from spend where leg_id = ?", (meta["leg_id"],))
    result = CliRunner().invoke(cli, ["status", run.doc["wave_id"], "--json"])
    doc = json.loads(result.stdout)
    assert doc["rebuilt"] is True and doc["status"] == "partial"
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "aborted"]
    # no wave.json names its process, so nothing says it is gone: no file is written back
    assert not (wave_dir / "wave.json").exists()


@both_ways
def test_a_hanging_leg_times_out_alone_and_a_dropped_one_is_named(orch, scripted_server):
    orch.provider()
    scripted_server.script("ok", Reply(text="fine"))
    scripted_server.script("hang", Reply(hang=True))
    scripted_server.script("drop", Reply(drop=True))
    result = fanout("-m", "scripted/ok,scripted/hang,scripted/drop", "-p", "x",
                    "--timeout", "0.03", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["status"] == "partial"
    ok, hang, drop = doc["legs"]
    assert ok["status"] == "complete"
    assert hang["status"] == "error" and hang["reason"].startswith("timeout")
    assert drop["status"] == "error" and drop["reason"].startswith("connection")


def unwritable_ledger(orch_home, monkeypatch):
    """ORCH_LEDGER_URL under a file where its directory should be; the file."""
    blocker = orch_home / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    monkeypatch.setenv("ORCH_LEDGER_URL", f"sqlite:///{blocker}/ledger.db")
    return blocker


@both_ways
def test_a_ledger_that_cannot_be_written_never_fails_the_run_nor_loses_a_row(
        orch, scripted_server, orch_home, monkeypatch):
    orch.provider()
    blocker = unwritable_ledger(orch_home, monkeypatch)
    result = fanout("-m", "scripted/a,scripted/b", "-p", "x", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "complete" and doc["ledger_errors"] == []
    # beside the ledger is a file, so the rows went to the fallback outbox, fsync'd
    fallback = orch_home.parent / "outbox-fallback"
    lines = [json.loads(x) for f in fallback.glob("ledger-outbox-*.jsonl")
             for x in f.read_text().splitlines()]
    ends = [x["row"]["leg_id"] for x in lines if x["row"]["status"] == "complete"]
    assert sorted(ends) == sorted(leg["leg_id"] for leg in doc["legs"])  # + rows in flight
    assert all(leg["ledger_outbox"].startswith(str(fallback)) for leg in doc["legs"])
    assert any("wait in the outbox" in n for n in doc["notices"])
    # once the ledger can be opened, the next command replays the rows, exactly once
    blocker.unlink()
    blocker.mkdir()
    spend = CliRunner().invoke(cli, ["spend"])
    assert "replayed 2 rows" in spend.output and "2 legs" in spend.output, spend.output
    again = CliRunner().invoke(cli, ["spend"])
    assert "replayed" not in again.output and "2 legs" in again.output
    assert not list(fallback.glob("ledger-outbox-*.jsonl"))


@both_ways
def test_a_row_no_ledger_and_no_outbox_takes_is_said_and_exits_2(
        orch, scripted_server, orch_home, monkeypatch):
    orch.provider()
    blocker = unwritable_ledger(orch_home, monkeypatch)
    monkeypatch.setenv("ORCH_OUTBOX_DIR", str(blocker / "outbox"))
    result = fanout("-m", "scripted/a,scripted/b", "-p", "x", "--json")
    doc = json.loads(result.stdout)
    assert doc["status"] == "complete" and len(doc["ledger_errors"]) == 2
    assert result.exit_code == 2 and doc["exit_code"] == 2  # the record is incomplete
    assert result.stderr.count("spend ledger could not record") == 1
    # the request journal had no place either: said on the leg, the request still went
    assert all(e.split(": ", 1)[1].startswith(("ledger: ", "request journal: "))
               for e in doc["artifact_errors"])
    assert any("request journal: " in e for e in doc["artifact_errors"])
    wave = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert len(wave["ledger_errors"]) == 2 and wave["exit_code"] == 2


@both_ways
def test_non_utf8_stdin_is_read_leniently(orch, scripted_server):
    orch.provider()
    result = invoke(["fanout", "-m", "scripted/a", "--json"], input=b"why \xff\xfe this?")
    assert result.exit_code == 0, result.output
    content = scripted_server.requests_for("a")[0].body["messages"][-1]["content"]
    assert content.startswith("why") and "this?" in content


@pytest.mark.parametrize("args", [
    ["-m", "scripted/a", "--council", "x", "-p", "q"],
    ["-m", "scripted/a", "-p", "q", "-f", "f.md"],
    ["--retry-failed", "W", "-m", "scripted/a"],
])
@both_ways
@pytest.mark.refused_before_the_daemon  # prepared in the client: no word reaches it
def test_conflicting_options_are_usage_errors(orch, args):
    orch.provider()
    result = fanout(*args)
    assert result.exit_code == 2 and "Traceback" not in result.output


@both_ways
@pytest.mark.refused_before_the_daemon  # prepared in the client: no word reaches it
def test_an_unknown_provider_or_a_missing_key_stops_the_wave_before_any_spend(
        orch, scripted_server, monkeypatch):
    orch.provider()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for models, message, code in (
            ("scripted/a,foo/bar", "does not know the provider 'foo'", 2),  # a usage mistake
            ("scripted/a,openai/gpt-4o-mini", "OPENAI_API_KEY", 1)):  # the set-up's
        result = fanout("-m", models, "-p", "q")
        assert result.exit_code == code and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert scripted_server.count() == 0


def test_a_tool_call_answering_a_tool_less_request_is_not_run(orch, scripted_server):
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    ran = []

    class Probe:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("probe", "Probe.", {"type": "object", "properties": {}},
                         lambda: ran.append(1) or "p")]

    scripted_server.script("m", Reply(tool_calls=[{"name": "probe", "arguments": {}}]))
    run = orch.run_leg("m", plugins=[("probe", Probe())], max_steps=2)
    assert len(run.bodies) == 2 and "tools" not in run.bodies[1]
    assert ran == [1]  # the first step's call ran; the final, tool-less step's did not
    assert run.leg["status"] == "complete" and run.leg["stopped"] == "max_steps"


def test_a_leg_whose_request_failed_still_counts_it_sent(orch, scripted_server):
    orch.provider()
    scripted_server.script("bad", Reply(status=401))
    run = orch.run_leg("bad")
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("auth")
    assert run.leg["requests"] == 1 and run.leg["cost_source"] == "none"
    assert run.leg["cost_usd"] == 0
