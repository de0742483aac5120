"""What orch prints: stdout carries only a command's output; every notice and warning is one
``orch:`` line on stderr, once (orchestrator/notices.py). A walk of the code finds any other
way an ``orch:`` line, a ``Note:`` or a ``Notice:`` could be printed; the main commands run on
the scripted server with stdout and stderr apart show where each line lands."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

both_ways = pytest.mark.usefixtures("both_ways")  # every assertion holds both ways

ROOT = Path(__file__).resolve().parent.parent
# The lines that are not notices, each with why it may print an `orch:` line itself:
OWN_LINES = {
    "orchestrator/cli/__init__.py": "the exit path: an error, an interrupt, an internal error",
    "orchestrator/progress.py": "the live progress of the legs (a line each, off a terminal)",
    "orchestrator/daemon/client.py": "the daemon's client: standard library only, no logging",
    "orchestrator/daemon/autostart.py": "the daemon's client: standard library only",
    "orchestrator/daemon/job.py": "a daemon job's exit line, written to its client's stderr",
}
PRINTERS = {"print", "echo", "secho", "write"}
NOTICE_WORDS = ("orch:", "Note:", "Notice:", "Degraded:")


def _text_start(node: ast.AST) -> str:
    """The literal text an argument starts with ('' when it starts with a value)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _text_start(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text_start(node.left)
    return ""


def printed_lines(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """Every call in orchestrator/ and plugins/ that prints text starting with an `orch:`
    line's prefix, a Note or a Notice: (file, line, the text's start)."""
    found = []
    for folder in ("orchestrator", "plugins"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                start = _text_start(node.args[0])
                if name in PRINTERS and start.startswith(NOTICE_WORDS):
                    found.append((rel, node.lineno, start[:40]))
    return found


def test_every_orch_line_is_said_through_the_notices_module():
    """A notice printed any other way (print, click.echo, a stream's write) is found here:
    it would miss -q, --log-json, the daemon's relay and the masking of key values."""
    stray = [hit for hit in printed_lines() if hit[0] not in OWN_LINES]
    assert stray == [], f"say these through orchestrator.notices.say: {stray}"


def test_the_walk_finds_a_line_printed_around_the_notices_module(tmp_path):
    """The walk is not vacuous: a planted `print("orch: ...")`, a `Note:` on stdout and a
    `sys.stderr.write(f"orch: ...")` are each found."""
    for folder in ("orchestrator", "plugins"):
        (tmp_path / folder).mkdir()
    (tmp_path / "orchestrator" / "planted.py").write_text(
        "import sys, click\n"
        "def a(x):\n    print(f'orch: started {x}', file=sys.stderr)\n"
        "def b(n):\n    click.echo(f'Note: {n}')\n"
        "def c(x):\n    sys.stderr.write('orch: warning: ' + x)\n"
        "def d(x):\n    click.echo(x)\n")
    assert [line for _, line, _ in printed_lines(tmp_path)] == [3, 5, 7]


# -- where each line lands -------------------------------------------------------------------
def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def truncating(orch, scripted_server):
    """Two legs: `short` stops at its output limit (a note on its leg), `long` answers."""
    orch.provider()
    scripted_server.script("short", Reply(text="The first half of a long answ",
                                          finish_reason="length"))
    scripted_server.script("long", Reply(text="A whole answer.\nOn two lines."))
    return scripted_server


def leg_blocks(doc: dict) -> str:
    """What stdout holds for a wave: each leg's header, answer and a blank line; no more."""
    out = []
    for leg in doc["legs"]:
        u = leg["usage"]
        cost = "unknown" if leg["cost_usd"] is None else f"${leg['cost_usd']:.4f}"
        out += [f"== {leg['model']} ({leg['leg_id']}) · {leg['status']} · "
                f"{u['input_tokens']}+{u['output_tokens']} tok · {cost} · "
                f"{leg['duration_s']:.1f}s", leg["answer"], ""]
    return "\n".join(out) + "\n"


PROGRESS = re.compile(r"^orch: \d{8}-\d{6}-[0-9a-f]{16}-\d+ ")  # a leg's progress line


def said(stderr: str) -> list[str]:
    """The notices and warnings on stderr (not the legs' progress lines)."""
    return [line for line in stderr.splitlines()
            if line.startswith("orch: ") and not PROGRESS.match(line)]


def test_fanout_stdout_is_the_answers_and_every_notice_is_one_line_on_stderr(truncating):
    human = invoke("fanout", "-m", "scripted/short,scripted/long", "-p", "go",
                   "--output-budget", "64", "--tools", "none")
    assert human.exit_code == 0, human.output
    lines = said(human.stderr)
    totals = [line for line in lines if line.startswith("orch: wave ")]
    assert len(totals) == 1 and ": complete · 2 legs · " in totals[0]
    first = json.loads((Path(totals[0].split("files: ")[1]) / "wave.json").read_text())
    assert human.stdout == leg_blocks(first)  # exactly the answers, nothing else
    truncated = [line for line in lines if "answer truncated" in line]
    assert len(truncated) == 1 and truncated[0].startswith("orch: scripted/short (")
    assert totals[0].endswith(f"files: {first['runs_dir']}/{first['wave_id']}")
    assert not any("key=" in line or "note=" in line for line in human.stderr.splitlines())
    # --json: stdout is the document and nothing else; stderr says the same lines
    js = invoke("fanout", "-m", "scripted/short,scripted/long", "-p", "go",
                "--output-budget", "64", "--tools", "none", "--json")
    assert json.loads(js.stdout)["status"] == "complete"
    assert [line.split("): ", 1)[1] for line in said(js.stderr) if "truncated" in line] == \
        [truncated[0].split("): ", 1)[1]]
    # -q: only errors on stderr
    quiet = invoke("fanout", "-m", "scripted/short,scripted/long", "-p", "go",
                   "--output-budget", "64", "--tools", "none", "-q")
    assert quiet.stderr == "" and quiet.stdout.startswith("== scripted/short")


def test_the_other_commands_print_only_their_output(truncating):
    """status, runs, spend, council run (report on stdout, its totals and notices said)."""
    run = json.loads(invoke("fanout", "-m", "scripted/long", "-p", "go", "--tools", "none",
                            "--json").stdout)
    for args in (("status", run["wave_id"]), ("runs",), ("spend",), ("spend", "--json")):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout.strip() and said(result.stderr) == [], (args, result.stderr)
        assert not any(line.startswith(("orch:", "Note", "Notice")) for line in
                       result.stdout.splitlines()), (args, result.stdout)
    assert json.loads(invoke("spend", "--json").stdout)["legs"] >= 1


def test_a_council_says_its_notices_and_totals_on_stderr(orch, scripted_server):
    from test_council_run import SEATS, script_bench

    orch.provider()
    script_bench(scripted_server, charlie=Reply(status=500, error_message="upstream exploded"))
    result = invoke("council", "run", "-p", "Review this.", "-m", SEATS, "--chair",
                    "scripted/delta")
    assert result.exit_code == 2, result.output
    assert result.stdout.startswith("Council ") and "Notice" not in result.stdout
    assert "Report:" not in result.stdout and "requests ·" not in result.stdout
    lines = said(result.stderr)
    assert sum("seat scripted/charlie did not review" in line for line in lines) == 1
    totals = [line for line in lines if line.startswith("orch: council ")]
    assert len(totals) == 1 and "/report.md" in totals[0]


# -- the words of a few messages -------------------------------------------------------------
def test_a_connection_error_names_the_endpoint_and_orch_doctor(orch, orch_home):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    orch.provider("gone", base_url=f"http://127.0.0.1:{port}/v1")
    result = invoke("fanout", "-m", "gone/m", "-p", "hi", "--no-validate-models", "--json")
    assert result.exit_code == 1
    reason = json.loads(result.stdout)["legs"][0]["reason"]
    assert reason.startswith(f"connection: cannot reach http://127.0.0.1:{port}/v1 (")
    assert reason.endswith("`orch doctor` checks every endpoint")


def test_the_endpoint_named_never_carries_its_credentials():
    from orchestrator.models.addressing import ResolvedModel
    from orchestrator.models.server import endpoint

    def named(url, provider="p"):
        litellm_model = "openai/m" if url else f"{provider}/m"
        return endpoint(ResolvedModel(name=f"{provider}/m", provider=provider,
                                      litellm_model=litellm_model, api_base=url))

    assert named("http://me:pw-Tern-8812@gw.internal:8080/v1") == "http://gw.internal:8080/v1"
    assert named("https://tok-abc@gw.internal/v1?x=1") == "https://gw.internal/v1?x=1"
    assert named(None, "openai").startswith("https://api.openai.com")
    assert named(None, "nosuch") == "nosuch's API"


def test_an_interrupted_council_names_what_each_seat_did(orch, scripted_server, capsys):
    """Two seats answered (billed) and one hangs when the run is interrupted: no seat reads
    "did not review — None"; each says how its leg ended and what it was billed."""
    import signal

    import anyio
    from test_council_run import SEATS, script_bench

    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Council
    from orchestrator.app.start import start
    from orchestrator.council.display import print_run

    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    script_bench(scripted_server, charlie=Reply(hang=True))
    request = Council(prompt="Review this.", prompt_source="--prompt", models=SEATS, chair="scripted/delta",
                      timeout_min=5, max_steps=4, tools="none", quiet=True)

    def two_reviews_in(handle) -> bool:
        wave = getattr(handle.runner, "_current", None)
        return wave is not None and sum(r.status == "complete" for r in wave.records) == 2 \
            and scripted_server.count("charlie") == 1

    with prepare(request) as prepared:
        handle = start(prepared)

        async def main():
            async with anyio.create_task_group() as tg:
                async def interrupt_while_charlie_hangs():
                    while not two_reviews_in(handle):
                        await anyio.sleep(0.02)
                    handle.interrupt(signal.SIGINT)
                tg.start_soon(interrupt_while_charlie_hangs)
                return await handle.drive()

        doc = anyio.run(main)
    assert doc["status"] == "aborted" and doc["exit_code"] == 130
    seats = {s["model"]: s for s in doc["seats"]}
    for name in ("scripted/alpha", "scripted/bravo"):
        assert re.fullmatch(r"the run was interrupted: its leg ended complete; its answer was "
                            r"billed \(\$0\.\d{4}\) and not read", seats[name]["reason"])
    assert seats["scripted/charlie"]["reason"].startswith(
        "the run was interrupted: its leg ended aborted")
    print_run(doc, None, None)
    shown = capsys.readouterr().out
    assert "None" not in shown and shown.count("did not review — the run was interrupted") == 3


def test_the_prompt_may_be_the_one_argument(orch, scripted_server):
    scripted_server.script("a", Reply(text="yes"))
    orch.provider()
    result = invoke("fanout", "-m", "scripted/a", "Why does this flake?", "--tools", "none")
    assert result.exit_code == 0, result.output
    sent = scripted_server.requests_for("a")[0].body["messages"][-1]["content"]
    assert sent.startswith("Why does this flake?")


def test_a_leg_whose_endpoint_reports_no_usage_shows_the_estimate_marked(orch, scripted_server,
                                                                       orch_home):
    """Not 0+0: the estimate, marked; the ledger keeps what the provider said (nothing)."""
    import sqlite3

    orch.provider()
    scripted_server.script("m", Reply(text="An answer of a few words.", no_usage=True))
    result = invoke("fanout", "-m", "scripted/m", "-p", "Tell me " * 50, "--tools", "none",
                    "--json")
    leg = json.loads(result.stdout)["legs"][0]
    assert leg["usage_estimated"] is True and leg["unreported"] == 1
    assert leg["usage"]["input_tokens"] > 50 and leg["usage"]["output_tokens"] > 3
    assert leg["usage_reported"]["input_tokens"] == 0
    doc = json.loads(result.stdout)
    assert doc["usage_estimated"] is True and doc["usage"] == {
        **leg["usage"]}  # the wave's totals are the shown usage, marked too
    con = sqlite3.connect(orch_home / "ledger.db")
    assert con.execute("select input_tokens, output_tokens from spend").fetchall() == [(0, 0)]
    human = invoke("fanout", "-m", "scripted/m", "-p", "Tell me " * 50, "--tools", "none")
    # one leg: its answer streams first, its header line follows it (docs/fanout.md)
    header = next(line for line in human.stdout.splitlines() if line.startswith("== "))
    assert " tok (estimated) · " in header and "· 0+0 tok" not in header


SAYER = '''\
"""Says one line when a wave starts (a single-file plugin)."""
from orchestrator.hookspecs import hookimpl
from orchestrator.notices import say


@hookimpl
def wave_start(wave):
    say("the sayer plugin saw the wave start")
'''


@both_ways
def test_a_line_said_inside_the_run_reaches_the_user_once_either_way(orch, scripted_server,
                                                                    orch_home):
    """A notice said in the run itself (a plugin's hook), not by the face: in-process it is
    the client's own log line; on a warm daemon the job's log line, relayed. Once, as
    ``orch: TEXT``, the same both ways."""
    from orchestrator.testing.daemon import invoke

    (orch_home / "plugins").mkdir(exist_ok=True)
    (orch_home / "plugins" / "sayer.py").write_text(SAYER)
    orch.provider()
    scripted_server.script("a", Reply(text="yes"))
    result = invoke(["fanout", "-m", "scripted/a", "-p", "q", "--tools", "none"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("orch: the sayer plugin saw the wave start\n") == 1, \
        result.stderr
