"""The read-only workspace tools, on the wire: what the model gets back, what it is refused."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

SECRET = "TOP-SECRET-OUTSIDE-THE-WORKSPACE"


@pytest.fixture
def ws(tmp_path) -> Path:
    """A workspace with code, a long file, a binary, a fifo and links in and out of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# demo\nSee src/app.py.\n")
    (root / "src" / "app.py").write_text(
        "import os\n\n\ndef main():\n    return os.getcwd()\n\n\ndef helper():\n    pass\n")
    (root / "src" / "big.py").write_text(
        "".join(f"value_{n} = compute({n}, 'some argument text')  # line {n}\n"
                for n in range(1, 3001)))
    (root / "data.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("def main(): in git\n")
    os.mkfifo(root / "pipe")
    os.symlink(outside, root / "link_out")
    os.symlink(outside / "secret.txt", root / "secret_link.txt")
    os.symlink(root / "src" / "app.py", root / "link_in.py")
    return root


def call(name: str, id: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments, "id": id}


def tool_results(body: dict) -> dict[str, str]:
    """tool_call_id -> content of the tool messages a request carried."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def test_each_tool_answers_on_the_wire(orch, scripted_server, ws):
    scripted_server.script("m", Reply(tool_calls=[
        call("list", "l1"), call("read", "r1", path="src/app.py", offset=4, limit=2),
        call("grep", "g1", pattern=r"def \w+", glob="*.py"),
        call("glob", "b1", pattern="**/*.py"), call("read", "r2", path="link_in.py", limit=1),
    ]), Reply(text="main is in src/app.py"))
    run = orch.run_leg("m", "Where is main?", workspace=ws)
    assert run.leg["status"] == "complete"
    assert run.leg["roster"] == ["glob", "grep", "list", "read"]
    assert [t["function"]["name"] for t in run.bodies[0]["tools"]] == ["read", "grep", "glob",
                                                                      "list"]
    got = tool_results(run.bodies[1])
    listing = got["l1"].splitlines()
    assert listing[0] == "./ (8 entries)" and listing[1:3] == [".git/", "src/"]
    assert "README.md  23 B" in listing
    assert "link_out -> (outside the workspace; cannot be read)" in listing
    assert "link_in.py -> src/app.py" in listing
    assert "pipe  (named pipe; cannot be read)" in listing
    assert got["r1"] == ("src/app.py (lines 4-5 of 9)\n     4\tdef main():\n"
                         "     5\t    return os.getcwd()\n"
                         "[limit 2; 4 more lines: read(path='src/app.py', offset=6, limit=2)]\n")
    # .git is not searched; the link into the tree is searched as itself
    assert got["g1"].splitlines() == ["link_in.py:4: def main():", "link_in.py:8: def helper():",
                                      "src/app.py:4: def main():", "src/app.py:8: def helper():"]
    assert got["b1"].splitlines() == ["link_in.py", "src/app.py", "src/big.py"]
    assert got["r2"].startswith("src/app.py (lines 1-1 of 9)\n     1\timport os\n")


def test_escapes_devices_and_binaries_are_refused_with_a_way_forward(orch, scripted_server, ws):
    outside_abs = str(ws.parent / "outside" / "secret.txt")
    attempts = {
        "dotdot": call("read", "dotdot", path="../outside/secret.txt"),
        "abs": call("read", "abs", path=outside_abs),
        "etc": call("read", "etc", path="/etc/passwd"),
        "linkdir": call("read", "linkdir", path="link_out/secret.txt"),
        "linkfile": call("read", "linkfile", path="secret_link.txt"),
        "listout": call("list", "listout", path="link_out"),
        "grepall": call("grep", "grepall", pattern="TOP-SECRET"),
        "grepout": call("grep", "grepout", pattern="TOP", path="src/../../outside"),
        "globout": call("glob", "globout", pattern="../outside/*"),
        "binary": call("read", "binary", path="data.bin"),
        "fifo": call("read", "fifo", path="pipe"),
        "dir": call("read", "dir", path="src"),
        "missing": call("read", "missing", path="src/nope/x.py"),
    }
    scripted_server.script("m", Reply(tool_calls=list(attempts.values())), Reply(text="ok"))
    run = orch.run_leg("m", "Read everything.", workspace=ws)
    assert run.leg["status"] == "complete" and run.leg["answer"] == "ok"
    got = tool_results(run.bodies[1])
    assert not any(SECRET in text for text in got.values())
    assert "climbs out of the workspace root with '..'" in got["dotdot"]
    assert "outside the workspace root; send a path relative" in got["abs"]
    assert "outside the workspace root" in got["etc"]
    for key in ("linkdir", "linkfile", "listout"):
        assert "symlink that leads outside the workspace root" in got[key], got[key]
    assert got["grepall"].startswith("no matches for 'TOP-SECRET'")
    assert got["grepall"].splitlines()[-1] == (  # secret_link.txt is never opened
        "[files not searched: 1 devices, pipes or sockets; 1 links leading outside the root]")
    assert "climbs out" in got["grepout"] and "must stay under the workspace root" in got["globout"]
    assert "is a binary file" in got["binary"]
    assert "is a named pipe, not a regular file" in got["fifo"]
    assert "is a directory; use list(path='src')" in got["dir"]
    assert "no such file or directory: 'src/nope/x.py'; list(path='src')" in got["missing"]
    refused = run.leg["workspace_refusals"]
    assert {r["target"] for r in refused} >= {"../outside/secret.txt", "secret_link.txt", "pipe"}


def _leg_context(root: Path, tmp: Path):
    """A real LegContext for calling the tools directly (the fuzz below makes thousands of
    calls; the wire tests above cover the same code through the engine)."""
    from orchestrator.config import Config
    from orchestrator.engine.context import LegContext
    from orchestrator.engine.record import LegRecord
    from orchestrator.models.addressing import ResolvedModel

    model = ResolvedModel(name="p/m", provider="p", litellm_model="openai/m", declared=True)
    return LegContext(leg_id="w-1", wave_id="w", model=model, briefing="",
                      record=LegRecord(leg_id="w-1", wave_id="w", model="p/m", provider="p"),
                      config=Config(path=tmp / "config.json", data={"providers": {"p": {}}}),
                      dir=tmp, workspace=root)


PARTS = st.sampled_from(["..", ".", "", "src", "app.py", "link_out", "link_in.py", "secret.txt",
                         "secret_link.txt", "outside", "ws", "nope", "~", "%2e%2e", "...",
                         "src/..", "../ws", "pipe"])


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["", "/", "ROOT/", "OUTSIDE/", "./", "//"]),
       parts=st.lists(PARTS, max_size=6))
def test_no_spelling_of_a_path_reads_outside_the_root(ws, tmp_path, prefix, parts):
    from orch_plugins.workspace import WorkspaceTools
    from orch_plugins.workspace_paths import Refused

    raw = prefix.replace("ROOT", str(ws)).replace("OUTSIDE", str(ws.parent / "outside"))
    raw += "/".join(parts)
    tools = WorkspaceTools(_leg_context(ws, tmp_path))
    try:
        real = tools.ws.resolve(raw)
    except Refused as refused:
        assert str(refused)  # a message the model can read
    else:
        assert os.path.commonpath([str(ws), real]) == str(ws)
        assert os.path.realpath(real) == real
    for tool, args in (("read", {"path": raw}), ("list", {"path": raw}),
                       ("grep", {"pattern": "SECRET", "path": raw})):
        try:
            text = getattr(tools, f"do_{tool}")(**args)
        except Refused as refused:
            text = str(refused)
        assert SECRET not in text


def test_an_oversized_read_is_refused_with_a_narrower_call_and_the_leg_goes_on(
        orch, scripted_server, ws):
    orch.provider(context_window=6000)
    scripted_server.window("small", 6000)  # the server rejects anything that would overflow

    def follow_the_advice(body, n):
        refusal = tool_results(body)["r1"]
        narrower = re.search(r"read\(path='src/big\.py', offset=1, limit=(\d+)\)", refusal)
        return Reply(tool_calls=[call("read", "r2", path="src/big.py", offset=1,
                                      limit=int(narrower.group(1)))])

    scripted_server.script("small", Reply(tool_calls=[call("read", "r1", path="src/big.py")]),
                           follow_the_advice, Reply(text="big.py computes values"))
    run = orch.run_leg("small", "What does big.py do?", workspace=ws)
    assert [r.status for r in scripted_server.requests_for("small")] == [200, 200, 200]
    assert run.leg["status"] == "complete" and run.leg["answer"] == "big.py computes values"
    refusal = tool_results(run.bodies[1])["r1"]
    assert refusal.startswith("error: read refused: lines 1-")
    numbers = re.search(r"about ([\d,]+) tokens, counted 2x to be safe: ([\d,]+), but this "
                        r"request has about ([\d,]+) tokens of room \(context window 6,000 - "
                        r"([\d,]+) already in the conversation - 2,048 kept for the answer\)",
                        refusal)
    cost, counted, room, used = (int(g.replace(",", "")) for g in numbers.groups())
    assert counted == 2 * cost > room == 6000 - used - 2048  # the proportional reserve
    second = tool_results(run.bodies[2])["r2"]
    assert second.startswith("src/big.py (lines 1-") and "value_1 = compute" in second
    assert "more lines: read(path='src/big.py'" in second
    assert run.leg["workspace_refusals"][0]["tool"] == "read"


def test_results_are_bounded_and_say_how_to_narrow(orch, scripted_server, ws):
    orch.config(plugin_config={"workspace": {"grep_matches": 5, "max_entries": 3}})
    scripted_server.script("m", Reply(tool_calls=[
        call("read", "r", path="src/big.py"), call("grep", "g", pattern="compute"),
        call("glob", "b", pattern="**"), call("list", "l"),
        call("read", "bad", path="src/app.py", offset="x"),
        call("read", "extra", path="src/app.py", file="y")]), Reply(text="done"))
    run = orch.run_leg("m", "Survey.", workspace=ws)
    got = tool_results(run.bodies[1])
    assert got["r"].startswith("src/big.py (lines 1-")
    assert len(got["r"]) < 12_500  # the character cap, plus header and footer
    footer = got["r"].splitlines()[-1]
    assert footer.startswith("[stopped at 12,000 characters; ") and "offset=" in footer
    grep = got["g"].splitlines()
    assert len([line for line in grep if line.startswith("src/big.py:")]) == 5
    assert grep[5].startswith("[first 5 matches shown; there are more. Narrow it")
    assert "[3 of " in got["b"] and "narrow the pattern" in got["b"]
    assert "[3 of 8 entries shown; use glob(pattern='*.py')" in got["l"]
    # (json_repair may answer these first, against the schema; either way the model is told)
    assert got["bad"].startswith("error: ") and "offset" in got["bad"]
    assert got["extra"].startswith("error: ") and "file" in got["extra"]


def test_the_tools_take_numbers_as_strings_and_name_unknown_arguments(ws, tmp_path):
    import anyio
    from orch_plugins.workspace import WorkspaceTools
    from orch_plugins.workspace_paths import Refused

    tools = WorkspaceTools(_leg_context(ws, tmp_path))
    assert tools.do_read(path="src/app.py", offset="4", limit="1").splitlines()[1] == (
        "     4\tdef main():")
    with pytest.raises(Refused, match='offset must be a whole number >= 1, got "x"'):
        tools.do_read(path="src/app.py", offset="x")
    with pytest.raises(Refused, match="offset 20 is past its end"):
        tools.do_read(path="src/app.py", offset=20)
    answer = anyio.run(lambda: tools.bind("read")(path="src/app.py", file="y"))
    assert answer == "error: read has no argument 'file'; it takes limit, offset, path"


def test_the_last_request_at_the_step_limit_carries_no_tools(orch, scripted_server, ws):
    from orchestrator.engine.leg import FINAL_STEP_DIRECTIVE

    scripted_server.script("qwen3-4b", Reply(tool_calls=[call("list", "a")]),
                           Reply(tool_calls=[call("list", "b")]), Reply(text="partial answer"))
    run = orch.run_leg("qwen3-4b", "Look around.", workspace=ws, max_steps=3)
    assert ["tools" in body for body in run.bodies] == [True, True, False]
    assert run.bodies[2]["messages"][-1] == {"role": "user", "content": FINAL_STEP_DIRECTIVE}
    assert run.leg["status"] == "complete" and run.leg["stopped"] == "max_steps"
    assert run.leg["answer"] == "partial answer"


def test_the_chair_and_a_leg_without_workspace_get_no_workspace_tools(orch, scripted_server,
                                                                         ws):
    run = orch.run_wave(["a"], "q", chair="judge", workspace=ws)
    assert "tools" in scripted_server.requests_for("a")[0].body
    assert "tools" not in scripted_server.requests_for("judge")[0].body
    bare = orch.run_leg("b", "q")  # no workspace given: nothing to read
    assert "tools" not in bare.bodies[0] and "roster" not in bare.leg
    assert run.doc["chair"]["status"] == "complete"


def fanout(*args: str):
    return CliRunner().invoke(cli, ["fanout", *args])


def test_fanout_tools_and_workspace_flags_are_recorded_on_the_wave(orch, scripted_server, ws,
                                                                   tmp_path, monkeypatch):
    orch.provider()
    scripted_server.script("m", Reply(tool_calls=[call("read", "r", path="README.md")]),
                           Reply(text="a demo"))
    result = fanout("-m", "scripted/m", "-p", "What is this?", "--workspace", str(ws), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["options"]["tools"] == "read" and doc["options"]["workspace"] == str(ws)
    assert tool_results(scripted_server.requests_for("m")[1].body)["r"].startswith(
        "README.md (lines 1-2 of 2)")

    monkeypatch.chdir(ws / "src")  # the default workspace: the git work tree's root
    scripted_server.script("n", Reply(tool_calls=[call("list", "l")]), Reply(text="two files"))
    doc = json.loads(fanout("-m", "scripted/n", "-p", "List.", "--json").stdout)
    assert doc["options"]["workspace"] == str(ws)
    assert "src/" in tool_results(scripted_server.requests_for("n")[1].body)["l"]

    scripted_server.script("o", Reply(text="q"))
    doc = json.loads(fanout("-m", "scripted/o", "-p", "q", "--tools", "none", "--json").stdout)
    assert doc["options"]["tools"] == "none"
    assert "tools" not in scripted_server.requests_for("o")[0].body

    bad = fanout("-m", "scripted/o", "-p", "q", "--workspace", str(tmp_path / "nowhere"))
    assert bad.exit_code == 2 and "is not a directory" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
