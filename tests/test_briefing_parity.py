"""One briefing check, every path (issue 25): in-process, through ``orch serve`` and through
``orch mcp``, a briefing holding a key value is refused before any request, in the same
words. With a daemon up the run is prepared (and so checked) in the client, which holds
``$GITHUB_TOKEN``: refused there, nothing reaches the daemon."""

from __future__ import annotations

import os

import anyio
import pytest

from orchestrator.testing.daemon import client, daemon_in_thread
from orchestrator.testing.scripted_server import Reply

pytest.importorskip("mcp")
from test_mcp import Session, one_line  # noqa: E402

pytestmark = pytest.mark.slow
GITHUB = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt" * 2
KEY = "sk-parity-test-0123456789abcdefgh"


@pytest.fixture
def project(orch, scripted_server, tmp_path, monkeypatch):
    """A project directory with a context file that holds $GITHUB_TOKEN's value."""
    orch.provider(api_key_env="SCRIPTED_KEY")
    monkeypatch.setenv("SCRIPTED_KEY", KEY)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB)
    scripted_server.default = Reply(text="must not be asked")
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "tok.txt").write_text(f"line one\ntoken: {GITHUB}\n")
    (root / "notes.md").write_text("nothing secret\n")
    return root


# (tool, MCP arguments, the CLI's argv, where the refusal points, whose value)
CASES = [
    ("fanout", {"models": ["scripted/a"], "prompt": "Review.", "context": ["tok.txt"]},
     ["fanout", "-m", "scripted/a", "-p", "Review.", "-c", "tok.txt"], "tok.txt line 2",
     "$GITHUB_TOKEN"),
    ("fanout", {"models": ["scripted/a"], "prompt": f"use {KEY} here"},
     ["fanout", "-m", "scripted/a", "-p", f"use {KEY} here"], "line 1", "$SCRIPTED_KEY"),
    ("council_run", {"models": ["scripted/a", "scripted/b"], "chair": "scripted/c",
                     "prompt": "Review.", "context": ["notes.md", "tok.txt"], "tools": "none"},
     ["council", "run", "-m", "scripted/a,scripted/b", "--chair", "scripted/c", "-p",
      "Review.", "-c", "notes.md", "-c", "tok.txt", "--tools", "none"], "tok.txt line 2",
     "$GITHUB_TOKEN"),
]


def refused(text: str, where: str, whose: str) -> None:
    assert f"the briefing holds the value of {whose}" in text, text
    assert where in text and "nothing was sent" in text, text
    assert GITHUB not in text and KEY not in text


def test_in_process(project, scripted_server, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    monkeypatch.chdir(project)
    for _, _, argv, where, whose in CASES:
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 1, result.output
        refused(result.stderr, where, whose)
    assert scripted_server.count() == 0


def test_through_the_daemon(project, scripted_server, tmp_path, monkeypatch):
    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    with daemon_in_thread() as daemon:
        for _, _, argv, where, whose in CASES:
            result = client(argv, cwd=project)
            assert result.exit_code == 1, result.output
            refused(result.stderr, where, whose)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert daemon.served == 0  # refused while prepared in the client: nothing was sent
    assert scripted_server.count() == 0


def test_through_mcp(project, scripted_server):
    env = {**os.environ, "LOG_LEVEL": "warning"}

    async def body(session):
        return [await session.call_tool(tool, args) for tool, args, *_ in CASES]

    session = Session(env, project)
    results = anyio.run(session.run, body)
    for (tool, _, _, where, whose), result in zip(CASES, results, strict=True):
        text = one_line(result)
        assert text.startswith(f"{tool}: ")
        refused(text, where, whose)
    assert scripted_server.count() == 0
