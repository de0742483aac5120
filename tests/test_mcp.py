"""`orch mcp` through the MCP SDK's own client, a temporary ORCH_HOME, the scripted server as
the provider, the real ledger.

What the server's tools do is checked in this process: `orch mcp`'s own server
(``mcp_server.server.build``) reached through the SDK's in-memory client, each session under
the environment a user's `orch mcp` would get. What only a process shows is checked on the
real `orch mcp` process over stdio (a session's stdout tee'd to a file, which must hold nothing
but JSON-RPC frames, and no key value in anything it wrote): everything printing, SIGTERM, a
client that vanishes, a provider echoing the key, the tool listing."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

mcp = pytest.importorskip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.slow
KEY = "sk-mcp-test-0123456789abcdefghijklmnop"  # what a real key looks like: never echoed


@pytest.fixture
def mcp_env(orch_home, scripted_server, tmp_path):
    (orch_home / "config.json").write_text(json.dumps({"providers": {"scripted": {
        "base_url": scripted_server.url, "api_key_env": "SCRIPTED_KEY"}}}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(ORCH_HOME=str(orch_home), SCRIPTED_KEY=KEY, LOG_LEVEL="info")
    scripted_server.default = Reply(text="an answer", usage={"prompt_tokens": 20,
                                                             "completion_tokens": 10})
    for name in ("a", "b", "c"):  # listed on GET /models, so the launch's model check knows them
        scripted_server.script(name, scripted_server.default)
    return env


class Session:
    """One `orch mcp` process and a client session on it; what it wrote, kept for checks.
    ``here``: `orch mcp`'s server in this process instead, under ``env``."""

    def __init__(self, env: dict, tmp: Path, *, here: bool = False) -> None:
        self.env, self.tmp, self.here = env, tmp, here
        self.stdout = tmp / f"mcp-stdout-{time.monotonic_ns()}.log"
        self.stderr = tmp / f"mcp-stderr-{time.monotonic_ns()}.log"
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.transport_errors: list[Exception] = []

    async def on_message(self, message):
        if isinstance(message, Exception):
            self.transport_errors.append(message)

    async def run_here(self, body):
        """``body(session)`` against `orch mcp`'s server built in this process (the SDK's
        in-memory transport), with ``env`` as the process environment meanwhile."""
        from mcp import Client

        from orchestrator import runtime
        from orchestrator.mcp_server.server import Jobs, build

        saved, cwd = dict(os.environ), os.getcwd()
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.tmp)  # where the client starts `orch mcp`
        runtime.config.cache_clear()
        runtime.plugin_manager.cache_clear()
        try:
            async with Client(build(Jobs()), message_handler=self.on_message) as client:
                return await body(client.session)
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
            runtime.config.cache_clear()
            runtime.plugin_manager.cache_clear()

    async def run(self, body):
        if self.here:
            return await self.run_here(body)
        # tee keeps a copy of exactly what orch mcp wrote on its stdout
        # and bash says how orch mcp exited
        params = StdioServerParameters(
            command="bash", args=["-c", f'"{sys.executable}" -m orchestrator mcp '
                                        f'| tee "{self.stdout}"; '
                                        'echo "orch mcp exited ${PIPESTATUS[0]}" >&2'],
            env=self.env, cwd=str(self.tmp))

        async def on_message(message):
            if isinstance(message, Exception):
                self.transport_errors.append(message)

        with self.stderr.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    await session.initialize()
                    return await body(session)

    async def on_progress(self, value, total, message):
        self.progress.append((value, total, message))

    @property
    def exit_code(self) -> int:
        return int(re.findall(r"^orch mcp exited (\d+)$", self.stderr.read_text(), re.M)[-1])

    def check_wire(self) -> None:
        """Only JSON-RPC frames on stdout, and no key value anywhere orch mcp wrote."""
        assert self.transport_errors == []
        if self.here:
            return  # no process, no stdout of its own: the process tests prove the wire
        lines = self.stdout.read_text().splitlines()
        assert lines, "the session wrote frames"
        for line in lines:
            assert json.loads(line)["jsonrpc"] == "2.0", line
        for path in (self.stdout, self.stderr):
            assert KEY not in path.read_text()


def run_session(env, tmp_path, body, *, here: bool = True) -> tuple[Session, object]:
    """``body(session)`` in one session: in this process (``here``), or on a real `orch mcp`
    whose wire and exit code are then checked. A session given a PYTHONPATH of its own (a
    plugin installed for it) is a real process: only a new interpreter reads it."""
    here = here and env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")
    session = Session(env, tmp_path, here=here)
    result = anyio.run(session.run, body)
    session.check_wire()
    if not here:
        assert session.exit_code == 0  # the client closed stdin: a clean exit
    return session, result


def ledger(home: Path, wave_id: str) -> list[dict]:
    """The wave's rows, the outbox replayed first: after an interrupt the ledger gets a
    moment (1 s) and then the outbox takes the rows (docs/spend.md), which loses nothing."""
    from orchestrator.ledger.spend import Ledger

    Ledger(f"sqlite:///{home / 'ledger.db'}").close()
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend where wave_id = ? order by leg_id",
                                         (wave_id,))]


def one_line(result) -> str:
    assert result.is_error
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text
    return text


def tool_errors(env, tmp_path, calls) -> list[str]:
    """Each (tool, arguments, _) called in one session: the one-line error it came back with."""
    async def body(session):
        return [await session.call_tool(name, args) for name, args, _ in calls]

    _, results = run_session(env, tmp_path, body)
    return [one_line(result) for result in results]


def test_tools_are_listed_with_a_description_for_every_field(mcp_env, tmp_path):
    async def body(session):
        return (await session.list_tools()).tools

    _, tools = run_session(mcp_env, tmp_path, body, here=False)  # as a client lists them
    assert [t.name for t in tools] == ["fanout", "council_run", "spend", "runs"]
    for tool in tools:
        assert len(tool.description) > 200, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert len(prop.get("description", "")) > 20, f"{tool.name}.{name}"
    by_name = {t.name: t for t in tools}
    assert by_name["fanout"].input_schema["required"] == ["prompt"]
    assert by_name["spend"].annotations.read_only_hint is True
    assert by_name["fanout"].annotations.read_only_hint is False


def test_fanout_returns_the_wave_document_with_progress_and_ledger_rows(
        mcp_env, tmp_path, orch_home, scripted_server):
    scripted_server.script("b", Reply(text="b's answer", usage={"prompt_tokens": 7,
                                                               "completion_tokens": 3}))

    async def body(session):
        return await session.call_tool(
            "fanout", {"models": ["scripted/a", "scripted/b"], "prompt": "Why is the sky blue?",
                       "tools": "none", "tag": "from-mcp"},
            progress_callback=sess.on_progress)

    sess = Session(mcp_env, tmp_path, here=True)
    result = anyio.run(sess.run, body)
    sess.check_wire()
    assert not result.is_error, result.content
    doc = result.structured_content
    assert json.loads(result.content[0].text) == doc
    assert doc["status"] == "complete" and doc["exit_code"] == 0
    assert [leg["answer"] for leg in doc["legs"]] == ["an answer", "b's answer"]
    assert doc["usage"]["input_tokens"] == 27 and doc["tag"] == "from-mcp"
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["status"] == "complete" and on_disk["legs"] == doc["legs"]
    # what went on the wire: the briefing, with the key as the bearer, never in the body
    assert scripted_server.count() == 2
    body_text = json.dumps(scripted_server.chats[0].body)
    assert "Why is the sky blue?" in body_text and KEY not in body_text
    assert scripted_server.chats[0].headers["authorization"] == f"Bearer {KEY}"
    rows = ledger(orch_home, doc["wave_id"])
    assert [(r["model"], r["status"], r["tag"]) for r in rows] == [
        ("scripted/a", "complete", "from-mcp"), ("scripted/b", "complete", "from-mcp")]
    assert [r["input_tokens"] for r in rows] == [20, 7]
    # progress: each leg's start and end, rising, out of the wave's two legs
    values = [p[0] for p in sess.progress]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values[-1] == 2 and {p[1] for p in sess.progress} == {2}
    messages = " | ".join(p[2] for p in sess.progress)
    for leg in doc["legs"]:
        assert f"{leg['leg_id']} {leg['model']} running" in messages
        assert f"{leg['leg_id']} {leg['model']} complete" in messages


def test_a_watching_client_gets_each_legs_text_as_progress_and_others_read_whole(
        mcp_env, tmp_path, orch_home, scripted_server):
    """A call with a progressToken streams its legs (the wire asks for a stream) and sends
    their text as progress notifications, masked and inert, with the existing progress; a
    follow-up (continue_wave) too; a call without one is read whole, as before. On the real
    `orch mcp` over stdio: the one process test of this promise."""
    hostile = f"Blue light \x1b]52;c;ZXZpbA==\x07 scatters more, key {KEY} never shown."
    scripted_server.script("a", Reply(text=hostile, chunk_delay=0.01,
                                      usage={"prompt_tokens": 20, "completion_tokens": 10}))
    scripted_server.script("b", Reply(text="b says red.", chunk_delay=0.01))
    seen: dict[str, list] = {"first": [], "follow": []}

    async def body(session):
        async def first(value, total, message):
            seen["first"].append((value, total, message))

        async def follow(value, total, message):
            seen["follow"].append((value, total, message))

        one = await session.call_tool(
            "fanout", {"models": ["scripted/a", "scripted/b"], "prompt": "Why is the sky blue?",
                       "tools": "none"}, progress_callback=first)
        scripted_server.script("a", Reply(text="Follow-up answer from a.", chunk_delay=0.01))
        scripted_server.script("b", Reply(text="Follow-up answer from b."))
        two = await session.call_tool("fanout", {"continue_wave": "last", "prompt": "And why?"},
                                      progress_callback=follow)
        three = await session.call_tool(
            "fanout", {"models": ["scripted/a"], "prompt": "Nobody watches", "tools": "none"})
        return one, two, three

    sess, (one, two, three) = run_session(mcp_env, tmp_path, body, here=False)
    for result in (one, two, three):
        assert not result.is_error, result.content
    chats = scripted_server.chats
    assert [c.body.get("stream") for c in chats] == [True, True, True, True, None]
    doc = one.structured_content
    by_model = {leg["model"]: leg for leg in doc["legs"]}
    for name in ("first", "follow"):
        values = [p[0] for p in seen[name]]
        assert values == sorted(values) and len(set(values)) == len(values), name
        assert values[-1] == 2 and {p[1] for p in seen[name]} == {2}
    texts = [m for _, _, m in seen["first"] if ": " in m]
    leg_a = by_model["scripted/a"]["leg_id"]
    streamed_a = "".join(m.split(": ", 1)[1] for m in texts if m.startswith(f"{leg_a} "))
    assert "Blue light" in streamed_a and "scatters more" in streamed_a
    assert "\x1b" not in streamed_a and "\\x1b]52" in streamed_a  # shown, inert
    assert KEY not in json.dumps(seen) and "never shown." in streamed_a
    assert len(texts) > 4  # piece by piece, not one message at the end
    # each leg's text arrived before that leg's end line
    lines = [m for _, _, m in seen["first"]]
    assert lines.index(next(m for m in lines if m.startswith(f"{leg_a} scripted/a:"))) < \
        lines.index(next(m for m in lines if m.startswith(f"{leg_a} scripted/a complete")))
    follow_a = "".join(m.split(": ", 1)[1] for _, _, m in seen["follow"]
                       if " scripted/a: " in m)
    assert follow_a == "Follow-up answer from a."
    assert three.structured_content["legs"][0]["answer"] == "Follow-up answer from a."


def test_a_cancelled_call_finalises_the_wave_as_sigint_would(
        mcp_env, tmp_path, orch_home, scripted_server):
    scripted_server.script("slow", Reply(hang=True))
    runs = orch_home / "runs"

    async def body(session):
        with anyio.CancelScope() as scope:
            async def cancel_when_sent():
                while scripted_server.count("slow") == 0 or scripted_server.count("a") == 0:
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)  # the quick leg ends, the slow one hangs
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_sent)
                await session.call_tool("fanout", {"models": ["scripted/a", "scripted/slow"],
                                                   "prompt": "q", "tools": "none"})
        # the same server goes on serving; by now the wave has its final wave.json
        for _ in range(600):
            docs = [json.loads(p.read_text()) for p in runs.glob("*/wave.json")]
            if docs and docs[0]["status"] != "running":
                break
            await anyio.sleep(0.05)
        return await session.call_tool("runs", {})

    _, listing = run_session(mcp_env, tmp_path, body)
    wave = json.loads(next(runs.glob("*/wave.json")).read_text())
    assert wave["signal"] == 2 and wave["exit_code"] == 130, wave
    assert [leg["status"] for leg in wave["legs"]] == ["complete", "aborted"]
    assert wave["status"] == "partial"  # one answered before the cancel, as after Ctrl-C
    assert listing.structured_content["runs"][0]["status"] == "partial"
    rows = ledger(orch_home, wave["wave_id"])  # every leg in the ledger, the aborted one too
    assert [r["status"] for r in rows] == ["complete", "aborted"]
    leg_meta = json.loads((runs / f"{wave['wave_id']}-2" / "metadata.json").read_text())
    assert leg_meta["status"] == "aborted"


def test_bad_input_is_a_tool_error_in_one_line_and_nothing_is_sent(
        mcp_env, tmp_path, scripted_server):
    calls = [
        ("fanout", {"prompt": "x", "models": "scripted/a"}, "models: 'scripted/a' is not of type"),
        ("fanout", {"prompt": "   ", "models": ["scripted/a"]}, "prompt:"),
        ("fanout", {"models": ["scripted/a"]}, "'prompt' is a required property"),
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "max_cost": -1}, "max_cost:"),
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "bogus": 1}, "'bogus' was unexpected"),
        ("fanout", {"prompt": "x", "models": ["nope/a"]}, "litellm does not know the provider"),
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "context": ["/no/such/file"]},
         "/no/such/file"),
        ("council_run", {"prompt": "x", "models": ["scripted/a", "scripted/b"]}, "no chair"),
        ("spend", {"since": "yesterday-ish"}, "yesterday-ish"),
        ("runs", {"action": "show", "id": "no-such-run"}, "no run 'no-such-run'"),
        ("runs", {"action": "show"}, "needs an id"),
        ("runs", {"action": "search"}, "action 'search' needs a query"),
        ("runs", {"action": "search", "query": '"'}, "nothing to search for in '\"'"),
        ("nope", {}, "no tool 'nope'"),
        ("fanout", {"prompt": "x", "models": [f"scripted/m{i}" for i in range(500)]},
         "models: the list of 500 entries is too long"),
        ("fanout", {"prompt": "x", "models": ["scripted/a,scripted/b"]}, "models.0:"),
        # a key pasted into the prompt: refused before any spend, the value never echoed
        ("fanout", {"prompt": f"debug this: OPENAI={KEY}", "models": ["scripted/a"]},
         "the briefing holds the value of $SCRIPTED_KEY"),
    ]

    for (name, _, expected), text in zip(calls, tool_errors(mcp_env, tmp_path, calls),
                                         strict=True):
        assert expected in text and KEY not in text, (name, text)
    assert scripted_server.count() == 0


def test_errors_from_the_shared_checks_name_the_tools_arguments_not_cli_flags(
        mcp_env, tmp_path, scripted_server):
    """The checks are the CLI's (one copy); an MCP client cannot pass `--context`, so its
    tool errors say `context`. A command to run (in backticks) keeps its flags, and a flag no
    argument stands for is named as the CLI's."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    odd = tmp_path / "not --models but a file name"
    two = ["scripted/a", "scripted/b"]
    calls = [
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "context": [str(folder)]},
         f"fanout: context {folder} is a directory; pass files (e.g. context {folder}/"),
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "context": [str(odd)]},
         f"fanout: context {odd} does not exist"),  # the path is quoted as given
        ("fanout", {"prompt": "x", "models": ["scripted/a"], "council": "c"},
         "fanout: pass either models or council, not both"),
        ("council_run", {"prompt": "x", "models": two, "chair": "scripted/a"},
         "the chair scripted/a is also a seat (scripted/a: same model, same variant); the "
         "chair must not judge its own review: pass another model or another variant as chair"),
        ("council_run", {"prompt": "x", "models": two, "chair": "scripted/c", "diff": "-x"},
         "council_run: diff '-x' is not a revision range"),
        ("council_run", {"prompt": "x", "council": "nope", "chair": "scripted/c"},
         "save one with `orch council save NAME --models a,b,c`"),
        ("runs", {"action": "show", "id": "no-such-run"},
         "(--runs-dir: an option of `orch runs` only; this tool has no such argument)"),
    ]

    for (name, _, expected), text in zip(calls, tool_errors(mcp_env, tmp_path, calls),
                                         strict=True):
        assert expected in text, (name, text)
        outside = "".join(text.replace(str(odd), "").split("`")[::2])  # commands to run
        flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", outside))
        assert flags <= {"--runs-dir"}, (name, text)
    assert scripted_server.count() == 0


# A third party's option with its own check, worded with its flag as every shared check is.
MIN_WORDS = """
from orchestrator.errors import OrchError
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

@hookimpl
def register_options(command):
    return [Option("max-words", type="int", min=1, max=500, help="At most N words."),
            Option("word-style", type="str", mcp=False, help="CLI only.")]

@hookimpl
def wave_start(wave):
    words = wave.options.get("max_words")
    if words is not None and words < 5:
        raise OrchError(f"--max-words {words} leaves no room for an answer; pass "
                        "--max-words 5 or more, or set --word-style terse")
"""


def test_a_plugins_option_is_named_as_the_tools_argument(mcp_env, tmp_path, scripted_server):
    """An error a plugin's check words with its flag (``--max-words``) names the argument
    the tool's schema has for it (``max_words``), from the same declaration; an option kept
    off the MCP tools stays a flag, said to be the CLI's."""
    from test_plugins_loading import Site

    site = Site(tmp_path / "site")
    site.path.mkdir()
    site.install("orch-mincap", "1.0", {"mincap": MIN_WORDS})
    env = {**mcp_env, "PYTHONPATH": str(site.path)}
    calls = [("fanout", {"prompt": "x", "models": ["scripted/a"], "max_words": 3}, None),
             ("council_run", {"prompt": "x", "models": ["scripted/a", "scripted/b"],
                              "chair": "scripted/c", "max_words": 2}, None)]
    fanout, council = tool_errors(env, tmp_path, calls)
    assert fanout == ("fanout: max_words 3 leaves no room for an answer; pass max_words 5 or "
                      "more, or set --word-style terse (--word-style: an option of `orch "
                      "fanout` only; this tool has no such argument)")
    assert "error: max_words 2 leaves no room for an answer; pass max_words 5 or more" \
        in council and "--max-words" not in council, council
    assert scripted_server.count() == 0


def test_a_model_the_provider_does_not_list_is_refused_unless_validate_models_is_false(
        mcp_env, tmp_path, scripted_server):
    async def body(session):
        return [await session.call_tool(tool, {"prompt": "x", "tools": "none", **args})
                for tool, args in (
                    ("fanout", {"models": ["scripted/a", "scripted/bb"]}),
                    ("council_run", {"models": ["scripted/a", "scripted/b"],
                                     "chair": "scripted/cc"}),
                    ("fanout", {"models": ["scripted/bb"], "validate_models": False}))]

    _, (typo, chair, sent) = run_session(mcp_env, tmp_path, body)
    assert ("scripted/bb is not among the 3 models scripted lists for the key in $SCRIPTED_KEY "
            "(live); did you mean scripted/b?") in one_line(typo)
    assert "or pass validate_models: false to send the name as is" in one_line(typo)
    assert "--" not in one_line(typo).replace("`orch models`", "")
    assert "scripted/cc is not among the 3 models" in one_line(chair)  # the chair is checked
    assert not sent.is_error, sent.content
    assert [r.model for r in scripted_server.chats] == ["bb"]  # only the one sent as given


def test_a_missing_key_is_refused_before_any_request(mcp_env, tmp_path, scripted_server):
    env = {k: v for k, v in mcp_env.items() if k != "SCRIPTED_KEY"}

    async def body(session):
        return await session.call_tool("fanout", {"prompt": "x", "models": ["scripted/a"]})

    _, result = run_session(env, tmp_path, body)
    assert "SCRIPTED_KEY" in one_line(result)
    assert scripted_server.count() == 0


def test_max_cost_refuses_on_the_wire_and_in_the_ledger(
        mcp_env, tmp_path, orch_home, scripted_server):
    config = json.loads((orch_home / "config.json").read_text())
    config["providers"]["scripted"].update(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    (orch_home / "config.json").write_text(json.dumps(config))

    async def body(session):
        return await session.call_tool("fanout", {"prompt": "q", "models": ["scripted/a"],
                                                  "tools": "none", "max_cost": 1})

    _, result = run_session(mcp_env, tmp_path, body)
    text = one_line(result)
    assert "COST_CEILING" in text and "scripted/a" in text
    doc = result.structured_content
    assert doc["exit_code"] == 1 and doc["legs"][0]["status"] == "refused"
    assert [r["model"] for r in doc["budget_refusals"]] == ["scripted/a"]
    assert scripted_server.count() == 0  # never sent
    rows = ledger(orch_home, doc["wave_id"])
    assert [(r["status"], r["cost_usd"]) for r in rows] == [("refused", 0)]


def test_spend_and_runs_return_what_the_cli_reports(mcp_env, tmp_path, orch_home):
    async def body(session):
        wave = (await session.call_tool("fanout", {"prompt": "q", "tools": "none",
                                                   "models": ["scripted/a", "scripted/b"]}))
        wave_id = wave.structured_content["wave_id"]
        return wave_id, [await session.call_tool(name, args) for name, args in (
            ("spend", {}), ("spend", {"group_by": "model", "since": "all"}), ("runs", {}),
            ("runs", {"action": "show", "id": wave_id}),
            ("runs", {"action": "search", "query": "an answer", "limit": 5}))]

    _, (wave_id, results) = run_session(mcp_env, tmp_path, body)
    runner = CliRunner()
    for argv, result in zip((["spend", "--json"],
                             ["spend", "--json", "--group-by", "model", "--since", "all"],
                             ["runs", "--json"], ["runs", "show", wave_id, "--json"],
                             ["runs", "search", "an", "answer", "--limit", "5", "--json"]),
                            results, strict=True):
        cli_result = runner.invoke(cli, argv)
        assert cli_result.exit_code == 0, cli_result.output
        assert not result.is_error
        got = dict(result.structured_content)
        if argv[0] == "runs" and len(argv) == 2 or "--group-by" in argv:
            assert got.pop("total") == len(got.get("runs") or got.get("groups"))  # bounded
        assert got == json.loads(cli_result.stdout), argv
    assert results[0].structured_content["legs"] == 2
    found = results[-1].structured_content  # the wave, by its answers' text
    assert [r["id"] for r in found["runs"]] == [wave_id] and found["runs"][0]["matches"] == 2


STRAY = """
import os, subprocess
import orchestrator.engine.leg as leg_module

_run = leg_module.Leg.run

async def run(self):
    print("STRAY print to sys.stdout")
    os.write(1, b"STRAY raw write to fd 1\\n")
    subprocess.run(["echo", "STRAY child process"], check=True)
    from orchestrator.runtime import litellm
    litellm().set_verbose = True  # litellm's own debug prints
    await _run(self)

leg_module.Leg.run = run
"""


def test_nothing_but_frames_on_stdout_even_when_everything_prints(mcp_env, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STRAY)
    env = dict(mcp_env, PYTHONPATH=str(site), LOG_LEVEL="debug")

    async def body(session):
        return await session.call_tool("fanout", {"prompt": "q", "models": ["scripted/a"],
                                                  "tools": "none"})

    sess, result = run_session(env, tmp_path, body)  # check_wire: JSON-RPC lines only
    assert not result.is_error, result.content
    err = sess.stderr.read_text()
    for stray in ("STRAY print to sys.stdout", "STRAY raw write to fd 1", "STRAY child process"):
        assert stray in err
    assert "orch: debug: " in err  # structlog at LOG_LEVEL=debug: on stderr


def test_orch_help_lists_mcp_without_importing_the_sdk():
    from orchestrator.testing.imports import imported_by

    out, heavy = imported_by(["--help"], ("mcp", "litellm"))
    assert out.returncode == 0, out.stderr
    assert heavy == [], "imported"
    assert "mcp " in out.stdout and "MCP on stdio" in out.stdout


def wait_for(predicate, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def test_sigterm_to_orch_mcp_finalises_its_wave_answers_the_call_and_exits_143(
        mcp_env, tmp_path, orch_home, scripted_server):
    scripted_server.script("slow", Reply(hang=True))
    runs = orch_home / "runs"

    async def body(session):
        async def kill_when_sent():
            await anyio.to_thread.run_sync(wait_for, lambda: scripted_server.count("slow"),
                                           "the slow leg's request")
            wave = json.loads(next(runs.glob("*/wave.json")).read_text())
            os.kill(wave["pid"], signal.SIGTERM)  # orch mcp's own pid, as wave.json says

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_when_sent)
            return await session.call_tool("fanout", {"models": ["scripted/slow"],
                                                      "prompt": "q", "tools": "none"})

    sess = Session(mcp_env, tmp_path)
    result = anyio.run(sess.run, body)
    assert "interrupted" in one_line(result)
    doc = result.structured_content
    assert doc["signal"] == signal.SIGTERM and doc["exit_code"] == 143
    wave = json.loads((runs / doc["wave_id"] / "wave.json").read_text())
    assert wave["status"] == "aborted" and wave["legs"][0]["status"] == "aborted"
    assert wave["client_pid"] == wave["pid"]  # orch mcp is the `orch` command that was run
    assert [r["status"] for r in ledger(orch_home, doc["wave_id"])] == ["aborted"]
    assert sess.exit_code == 143


def frame(message: dict) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def raw_client(mcp_env: dict, cwd) -> subprocess.Popen:
    """``orch mcp`` driven by hand (raw frames on its stdin), initialised."""
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "mcp"], env=mcp_env,
                            cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(frame({"id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}))
    proc.stdin.write(frame({"method": "notifications/initialized"}))
    return proc


def test_a_client_that_vanishes_mid_wave_leaves_it_finalised(mcp_env, tmp_path, orch_home,
                                                            scripted_server):
    """No cancel notification, only the end of stdin (a client killed with -9)."""
    scripted_server.script("slow", Reply(hang=True))
    proc = raw_client(mcp_env, tmp_path)
    try:
        proc.stdin.write(b"this is not JSON-RPC\n")  # a broken client line: served on
        proc.stdin.write(frame({"id": 2, "method": "tools/call", "params": {
            "name": "fanout", "arguments": {"models": ["scripted/slow"], "prompt": "q",
                                            "tools": "none"}}}))
        proc.stdin.flush()
        wait_for(lambda: scripted_server.count("slow"), "the slow leg's request")
        out, err = proc.communicate(timeout=60)  # closes stdin: the client is gone
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    wave = json.loads(next((orch_home / "runs").glob("*/wave.json")).read_text())
    assert wave["status"] == "aborted" and wave["signal"] == signal.SIGINT
    assert [r["status"] for r in ledger(orch_home, wave["wave_id"])] == ["aborted"]
    for line in out.decode().splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_a_client_killed_with_its_pipes_closed_ends_orch_mcp_with_0(mcp_env, tmp_path,
                                                                   orch_home, scripted_server):
    """A client killed while a watched leg streams: both its pipes close, so the frames orch
    still has to send (progress, the call's answer) meet a broken pipe. The wave is finalised
    as above and `orch mcp` exits 0 as docs/mcp.md says, not 1 with an internal error."""
    scripted_server.script("slow", Reply(text=" ".join(["word"] * 400), chunk_delay=0.02))
    proc = raw_client(mcp_env, tmp_path)
    try:
        proc.stdin.write(frame({"id": 2, "method": "tools/call", "params": {
            "name": "fanout", "arguments": {"models": ["scripted/slow"], "prompt": "q",
                                            "tools": "none"}, "_meta": {"progressToken": 7}}}))
        proc.stdin.flush()
        for line in proc.stdout:  # the leg's text is streaming to us: now vanish
            if b"notifications/progress" in line and b"word" in line:
                break
        proc.stdout.close()
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert b"internal error" not in err and b"Traceback" not in err, err.decode()[-2000:]
    assert proc.returncode == 0, err.decode()[-2000:]
    wave = json.loads(next((orch_home / "runs").glob("*/wave.json")).read_text())
    assert wave["status"] == "aborted" and wave["signal"] == signal.SIGINT
    assert [r["status"] for r in ledger(orch_home, wave["wave_id"])] == ["aborted"]


def test_council_run_returns_the_verdict_tiers_and_top_findings(mcp_env, tmp_path, orch_home,
                                                                scripted_server):
    from test_council_run import script_bench

    script_bench(scripted_server)

    async def body(session):
        return await session.call_tool("council_run", {
            "prompt": "Review this change to the query layer.", "tools": "none",
            "models": ["scripted/alpha", "scripted/bravo", "scripted/charlie"],
            "chair": "scripted/delta"}, progress_callback=sess.on_progress)

    sess = Session(mcp_env, tmp_path, here=True)
    result = anyio.run(sess.run, body)
    sess.check_wire()
    assert not result.is_error, result.content
    out = result.structured_content
    assert out["status"] == "complete" and out["exit_code"] == 0
    assert out["verdict"] == "fix-first" and out["chair"]["model"] == "scripted/delta"
    assert out["tiers"] == {"confirmed": 1, "contested": 1, "singleton": 1, "disputed": 1}
    top = out["top_findings"][0]
    assert top["tier"] == "confirmed" and "injection" in top["claim"] and top["agree"] >= 1
    assert out["findings"] == len(out["top_findings"]) == 4
    assert "VERDICT: fix-first" in out["chair_synthesis"]
    assert Path(out["report"]).is_file() and Path(out["report_html"]).is_file()
    run = json.loads((Path(out["dir"]) / "run.json").read_text())
    assert run["verdict"] == out["verdict"] and run["cost_usd"] == out["cost_usd"]
    values = [p[0] for p in sess.progress]
    assert values and values == sorted(values) and {p[1] for p in sess.progress} == {None}


def test_a_cancelled_council_is_finalised_as_after_sigint(mcp_env, tmp_path, orch_home,
                                                          scripted_server):
    for name in ("alpha", "bravo", "charlie"):
        scripted_server.script(name, Reply(hang=True))
    scripted_server.script("delta", Reply(text="the chair's verdict"))  # listed, never reached

    async def body(session):
        with anyio.CancelScope() as scope:
            async def cancel_when_sent():
                while scripted_server.count() < 3:
                    await anyio.sleep(0.05)
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_sent)
                await session.call_tool("council_run", {
                    "prompt": "Review it.", "tools": "none", "chair": "scripted/delta",
                    "models": ["scripted/alpha", "scripted/bravo", "scripted/charlie"]})
        for _ in range(600):  # the cancel is not answered: wait for run.json to settle
            listing = await session.call_tool("runs", {"status": ["aborted"]})
            if listing.structured_content["runs"]:
                return listing
            await anyio.sleep(0.05)
        return listing

    _, listing = run_session(mcp_env, tmp_path, body)
    [entry] = listing.structured_content["runs"]
    run = json.loads((Path(entry["dirs"][0]) / "run.json").read_text())
    assert run["status"] == "aborted" and run["signal"] == 2 and run["exit_code"] == 130
    assert (Path(entry["dirs"][0]) / "report.md").is_file()
    assert scripted_server.count("delta") == 0  # no stage started after the cancel


def test_two_calls_run_at_once_on_one_server(mcp_env, tmp_path, scripted_server):
    import threading

    second_sent = threading.Event()

    def first(body, n):  # answers only once the other call's request has arrived
        return Reply(text="overlapped" if second_sent.wait(60) else "serialised")

    def second(body, n):
        second_sent.set()
        return Reply(text="second")

    scripted_server.script("first", first)
    scripted_server.script("second", second)

    async def body(session):
        results = {}

        async def call(model):
            results[model] = await session.call_tool(
                "fanout", {"prompt": "q", "models": [f"scripted/{model}"], "tools": "none"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "first")
            await anyio.to_thread.run_sync(wait_for, lambda: scripted_server.count("first"),
                                           "the first call's request")
            tg.start_soon(call, "second")
        return results

    _, results = run_session(mcp_env, tmp_path, body)
    assert results["first"].structured_content["legs"][0]["answer"] == "overlapped"
    assert results["second"].structured_content["legs"][0]["answer"] == "second"


def test_a_provider_that_echoes_the_key_never_gets_it_onto_the_wire(
        mcp_env, tmp_path, scripted_server):
    scripted_server.script("echo", Reply(status=400, error_message=f"invalid key {KEY}"))
    scripted_server.script("parrot", Reply(text=f"your key is {KEY}, and {KEY[:-1]}x"))

    async def body(session):
        return await session.call_tool(
            "fanout", {"prompt": "q", "models": ["scripted/echo", "scripted/parrot"],
                       "tools": "none"}, progress_callback=sess.on_progress)

    sess = Session(mcp_env, tmp_path)
    result = anyio.run(sess.run, body)
    sess.check_wire()  # stdout and stderr: no key value
    doc = result.structured_content
    assert doc["legs"][0]["status"] == "error" and doc["legs"][1]["status"] == "complete"
    assert KEY not in json.dumps(doc) and KEY not in str(sess.progress)
    assert scripted_server.count() == 2


def test_without_the_mcp_extra_it_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the extra sees
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    result = CliRunner().invoke(cli, ["mcp"])
    assert result.exit_code == 1
    assert result.output.strip() == ("orch: error: orch mcp needs the MCP SDK: "
                                     "pip install 'orch[mcp]'")


def test_installed_plugins_reshape_the_request_as_on_the_cli(mcp_env, tmp_path, orch_home,
                                                             scripted_server, monkeypatch):
    """orch-redact (an example third-party plugin, installed by the test set-up) rewrites
    the request on the wire for an `orch mcp` call exactly as for `orch fanout`."""
    pytest.importorskip("orch_redact")
    prompt = "Mail the report to alice@example.com please."

    async def body(session):
        return await session.call_tool("fanout", {"prompt": prompt, "models": ["scripted/a"],
                                                  "tools": "none"})

    _, result = run_session(mcp_env, tmp_path, body)
    via_mcp = json.dumps(scripted_server.chats[-1].body["messages"])
    monkeypatch.setenv("SCRIPTED_KEY", KEY)
    cli_result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/a", "-p", prompt,
                                          "--tools", "none", "--json"])
    assert cli_result.exit_code == 0, cli_result.output
    via_cli = json.dumps(scripted_server.chats[-1].body["messages"])
    assert "alice@example.com" not in via_mcp and "[redacted" in via_mcp
    assert via_mcp == via_cli
    leg = result.structured_content["legs"][0]
    assert leg["redactions"] == json.loads(cli_result.stdout)["legs"][0]["redactions"]


def test_a_ceiling_whose_plugin_is_off_is_refused_naming_the_argument(
        mcp_env, tmp_path, orch_home, scripted_server):
    """max_cost (or a config ceiling) with cost_ceiling disabled: refused, nothing sent."""
    env = {**mcp_env, "ORCH_DISABLE_PLUGINS": "cost_ceiling"}
    calls = [("fanout", {"prompt": "q", "models": ["scripted/a"], "max_cost": 1},
              "max_cost needs the cost_ceiling plugin, which is not loaded"),
             ("council_run", {"prompt": "q", "models": ["scripted/a", "scripted/b"],
                              "chair": "scripted/c", "max_cost": 1},
              "max_cost needs the cost_ceiling plugin, which is not loaded")]
    for (name, _, expected), text in zip(calls, tool_errors(env, tmp_path, calls),
                                         strict=True):
        assert expected in text and "--max-cost" not in text, (name, text)
    assert scripted_server.count() == 0


def test_fanout_deliberates_with_rounds(mcp_env, tmp_path, orch_home, scripted_server):
    """The MCP `fanout` tool's `rounds`: the same deliberation as `orch fanout --rounds`."""
    keep = '```json\n{"decision": "keep", "vote": "A", "reason": "fine"}\n```'
    for name in ("a", "b", "c"):
        scripted_server.script(name, Reply(text=f"answer {name}"), Reply(text=keep))

    async def body(session):
        return [await session.call_tool("fanout", {
            "models": ["scripted/a", "scripted/b", "scripted/c"], "prompt": "Q?",
            "tools": "none", "rounds": 3, "aggregate": "vote"},
            progress_callback=sess.on_progress),
            await session.call_tool("fanout", {"models": ["scripted/a"], "prompt": "Q?",
                                               "peers": 2})]

    sess = Session(mcp_env, tmp_path, here=True)
    result, refused = anyio.run(sess.run, body)
    sess.check_wire()
    assert not result.is_error, result.content
    doc = result.structured_content
    assert doc["kind"] == "deliberation" and doc["exit_code"] == 0
    assert [r["round"] for r in doc["rounds"]] == [1, 2]
    assert doc["stop"]["rule"] == "unchanged" and scripted_server.count() == 6
    # aggregate: the same vote over the final answers as `orch fanout --aggregate vote`
    assert doc["aggregate"]["outcome"] == "tie" and doc["aggregate"]["answers"] == 3
    assert doc["aggregate"]["winner"]["models"] == ["scripted/a"]
    assert any("-round-2-" in (p[2] or "") for p in sess.progress)
    assert "peers only applies to a deliberation" in one_line(refused)


def test_fanout_continues_a_wave_with_continue_wave(mcp_env, tmp_path, orch_home,
                                                     scripted_server):
    """The MCP `fanout` tool's `continue_wave`: the same follow-up as `orch fanout
    --continue`; a prompt given as it, or models with it, are one-line tool errors."""
    scripted_server.script("a", Reply(text="first a"), Reply(text="second a"))

    async def body(session):
        first = await session.call_tool("fanout", {"models": ["scripted/a"], "prompt": "Q1?",
                                                   "tools": "none"})
        wave = first.structured_content["wave_id"]
        return (wave, await session.call_tool("fanout", {"continue_wave": wave,
                                                         "prompt": "Q2?"}),
                await session.call_tool("fanout", {"continue_wave": "why did it?",
                                                   "prompt": "x"}),
                await session.call_tool("fanout", {"continue_wave": "last", "prompt": "x",
                                                   "models": ["scripted/a"]}))

    sess = Session(mcp_env, tmp_path, here=True)
    wave, result, as_prompt, with_models = anyio.run(sess.run, body)
    sess.check_wire()
    assert not result.is_error, result.content
    doc = result.structured_content
    assert doc["parent_wave_id"] == wave and doc["legs"][0]["answer"] == "second a"
    sent = [m["content"] for m in scripted_server.chats[-1].body["messages"]
            if m["role"] != "system"]
    assert sent == ["Q1?\n", "first a", "Q2?\n"]
    assert [r["parent_wave_id"] for r in ledger(orch_home, doc["wave_id"])] == [wave]
    assert "continue_wave is a wave_id" in one_line(as_prompt)
    assert "drop models" in one_line(with_models) and scripted_server.count() == 2
