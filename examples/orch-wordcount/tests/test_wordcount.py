"""orch-wordcount with orch's testing kit: the tool runs when a (scripted) model calls it and
its result is in the next request on the wire; the command runs through the real `orch`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

orch_wordcount = pytest.importorskip("orch_wordcount")  # skipped only when not installed

from orchestrator.testing.scripted_server import Reply  # noqa: E402

PLUGIN = [orch_wordcount]  # the kit loads orch's built-ins and this, nothing else installed


def test_a_scripted_tool_call_runs_the_tool_and_the_next_request_carries_the_result(
        orch, scripted_server):
    orch.config(plugin_config={"wordcount": {"tool": True}})
    scripted_server.script(
        "m", Reply(tool_calls=[{"name": "word_count", "arguments": {"text": "one two\nthree"}}]),
        Reply(text="Three words."))
    run = orch.run_leg("m", "How many words?", plugins=PLUGIN)
    assert run.leg["status"] == "complete" and run.leg["answer"] == "Three words."
    first, second = run.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["word_count"]
    assert first["tools"][0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to count."},
                       "path": {"type": "string", "description":
                                "Or: a file in the workspace, relative to its root."}}}
    call_id = second["messages"][-2]["tool_calls"][0]["id"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": call_id,
                                      "content": '{"words": 3, "lines": 2, "chars": 13}'}


def test_the_tool_reads_workspace_files_but_nothing_outside(orch, scripted_server, tmp_path):
    orch.config(plugin_config={"wordcount": {"tool": True}})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha beta gamma delta\n")
    (tmp_path / "secret.txt").write_text("outside")
    # orch's rules, through orchestrator.workspace: a credential file inside the workspace is
    # refused too (the example's own check let `.env` through), and so is a symlink out
    (workspace / ".env").write_text("API_TOKEN=env-secret-0123456789\n")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    scripted_server.script(
        "m", Reply(tool_calls=[{"name": "word_count", "arguments": {"path": p}} for p in (
            "notes.txt", "../secret.txt", ".env", "link.txt")]),
        Reply(text="done"))
    run = orch.run_leg("m", "count", plugins=PLUGIN, workspace=workspace)
    results = [m["content"] for m in run.bodies[1]["messages"] if m["role"] == "tool"]
    assert json.loads(results[0]) == {"words": 4, "lines": 1, "chars": 23}
    assert results[1].startswith("error: cannot read ../secret.txt:")
    assert "climbs out of the workspace root" in results[1]
    assert results[2].startswith("error: cannot read .env:") and "rule '.env*'" in results[2]
    assert "symlink that leads outside" in results[3]
    assert "env-secret" not in json.dumps(run.bodies) and "outside" not in results[0]
    # the kit's run object: each leg's folder and its record, as written
    assert run.record(1)["status"] == "complete" and run.record(1)["leg_id"] == run.leg["leg_id"]
    assert (run.leg_dir(1) / "conversation.jsonl").is_file()


def test_without_the_setting_no_tool_is_offered(orch, scripted_server):
    scripted_server.script("m", Reply(text="hi"))
    run = orch.run_leg("m", "hi", plugins=PLUGIN)
    assert "tools" not in run.bodies[0] and "roster" not in run.leg


def orch_cli(*args: str, home, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, ORCH_HOME=str(home))
    env.pop("ORCH_PLUGINS", None)
    env.pop("ORCH_DISABLE_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_the_subcommand_runs_through_the_real_orch_entry_point(orch_home, tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("one two three\nfour\n")
    done = orch_cli("wordcount", "--json", str(text), home=orch_home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {str(text): {"words": 4, "lines": 2, "chars": 19}}
    # Only this plugin's own warnings matter: a broken neighbour plugin may warn too.
    assert [line for line in done.stderr.splitlines() if "wordcount" in line] == []
    piped = orch_cli("wordcount", home=orch_home, stdin="a b c")
    assert piped.stdout.split() == ["3", "words", "1", "lines", "5", "chars", "-"]
    listed = orch_cli("--help", home=orch_home)
    assert "wordcount" in listed.stdout


def test_disabling_the_plugin_removes_the_command(orch_home):
    env_home = orch_home
    env = dict(os.environ, ORCH_HOME=str(env_home), ORCH_DISABLE_PLUGINS="wordcount")
    done = subprocess.run([sys.executable, "-m", "orchestrator", "wordcount"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "No such command 'wordcount'" in done.stderr
