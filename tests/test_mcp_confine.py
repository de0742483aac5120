"""``orch mcp``'s ``context`` paths stay inside the workspace (issue 25): an agent cannot send
/etc/passwd, a climb out with ``..``, a symlink out or a deny-listed file to a model. Each is
a one-line tool error and nothing is sent; a file inside the project still works. The
CLI's ``-c`` stays the human's choice. The refusals go through the real `orch mcp` process;
the cases that send (a file inside, a home directory) through its server in this process."""

from __future__ import annotations

import os

import anyio
import pytest
from click.testing import CliRunner

from orchestrator.testing.scripted_server import Reply

pytest.importorskip("mcp")
from test_mcp import Session, one_line  # noqa: E402

pytestmark = pytest.mark.slow
DOTENV = "DATABASE_PASSWORD=dotenv-secret-0123456789"


@pytest.fixture
def project(orch, scripted_server, tmp_path):
    orch.provider()
    scripted_server.default = Reply(text="an answer")
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('inside the project')\n")
    (root / ".env").write_text(DOTENV + "\n")
    (root / "passwd-link").symlink_to("/etc/passwd")
    (root / "etc-link").symlink_to("/etc")
    (tmp_path / "outside.txt").write_text("next to the project, not in it\n")
    return root


REFUSED = [
    ("/etc/passwd", "outside the workspace"),
    ("../outside.txt", "outside the workspace"),
    ("../..", "outside the workspace"),
    ("../../../../../../etc/passwd", "outside the workspace"),
    ("passwd-link", "symlink that leads outside"),
    ("etc-link/passwd", "symlink that leads outside"),
    (".env", "credential deny-list"),
    ("src/../.env", "credential deny-list"),
]


def test_agent_context_paths_outside_the_workspace_are_tool_errors(project, scripted_server):
    calls = [("fanout", {"models": ["scripted/a"], "prompt": "x", "context": ["src/app.py", raw]})
             for raw, _ in REFUSED]
    calls.append(("council_run", {"models": ["scripted/a", "scripted/b"], "chair": "scripted/c",
                                  "prompt": "x", "context": ["/etc/passwd"]}))

    async def body(session):
        return [await session.call_tool(name, args) for name, args in calls]

    session = Session({**os.environ}, project)
    results = anyio.run(session.run, body)
    expected = [*REFUSED, ("/etc/passwd", "outside the workspace")]
    for (name, _), (raw, why), result in zip(calls, expected, results, strict=True):
        text = one_line(result)
        assert text.startswith(f"{name}: context {raw!r} refused: "), text
        assert why in text and str(project) in text, text
        assert "root:" not in text and DOTENV not in text
    assert scripted_server.count() == 0  # nothing was sent


def test_a_file_inside_the_project_is_sent(project, scripted_server):
    async def body(session):
        return await session.call_tool("fanout", {"models": ["scripted/a"], "prompt": "x",
                                                  "context": ["src/app.py"], "tools": "none"})

    result = anyio.run(Session({**os.environ}, project, here=True).run, body)
    assert not result.is_error, result.content
    (request,) = scripted_server.chats  # not the launch's GET /models
    assert "inside the project" in request.body["messages"][-1]["content"]


def test_outside_any_project_in_a_home_directory_no_file_is_passed(orch, tmp_path,
                                                                   scripted_server):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("a note\n")

    async def body(session):
        return await session.call_tool("fanout", {"models": ["scripted/a"], "prompt": "x",
                                                  "context": ["notes.txt"]})

    orch.provider()
    result = anyio.run(Session({**os.environ, "HOME": str(home)}, home, here=True).run, body)
    text = one_line(result)
    assert "refused" in text and "start orch mcp in the project" in text
    assert scripted_server.count() == 0


def test_the_cli_context_stays_the_humans_choice(project, scripted_server, monkeypatch):
    from orchestrator.cli import cli

    monkeypatch.chdir(project)
    outside = project.parent / "outside.txt"
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/a", "-p", "x", "--tools",
                                      "none", "-c", str(outside)])
    assert result.exit_code == 0, result.output
    assert "next to the project" in scripted_server.chats[0].body["messages"][-1]["content"]
