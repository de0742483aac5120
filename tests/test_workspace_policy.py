"""Credential files never reach a provider; ignored files are not offered; the workspace
defaults to the git work tree, never a home directory or /; nothing under /proc is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from orch_plugins.workspace_paths import Refused, Workspace

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

CONTENTS = {
    ".env": "DATABASE_PASSWORD=dotenv-content-7f3a",
    ".env.local": "LOCAL_TOKEN=dotenv-local-content-91b2",
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-private-content-c0ffee",
    ".ssh/config": "Host prod\n  IdentityFile ssh-config-content-4d4d",
    ".aws/credentials": "[default]\naws_secret_access_key = aws-content-8e8e",
    ".netrc": "machine x login me password netrc-content-1a1a",
    "deploy/server.pem": "pem-content-2b2b",
    "project/.git-credentials": "https://me:gitcred-content-3c3c@example.com",
}


def call(name: str, id: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments, "id": id}


def tool_results(body: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def orch(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def home(tmp_path) -> Path:
    """A home-like directory: credential files next to ordinary ones."""
    root = tmp_path / "home"
    for rel, text in CONTENTS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    (root / "project" / "notes.md").write_text("ordinary notes: content-ok\n")
    return root


def test_credential_files_never_reach_the_provider(orch_home, scripted_server, home):
    """grep, glob, list and read of a home directory's credential files are refused by name
    of rule, and the scripted server's request log holds none of their content."""
    orch("provider", "add", "scripted", "--base-url", scripted_server.url)
    scripted_server.script("m", Reply(tool_calls=[
        call("grep", "g1", pattern="content"), call("grep", "g2", pattern=".", path=".ssh"),
        call("glob", "b1", pattern="**/*"), call("glob", "b2", pattern="**/.env*"),
        call("list", "l1"), call("list", "l2", path=".ssh"), call("list", "l3", path="deploy"),
        call("read", "r1", path=".env"), call("read", "r2", path=".ssh/id_rsa"),
        call("read", "r3", path=".aws/credentials"), call("read", "r4", path="./.netrc"),
        call("read", "r5", path="project/../deploy/server.pem"),
        call("read", "r6", path="project/.git-credentials"),
        call("read", "ok", path="project/notes.md"),
    ]), Reply(text="done"))
    env = {"HOME": str(home)}
    refused = orch("fanout", "-m", "scripted/m", "-p", "Look around.", "--workspace",
                   str(home), env=env)
    assert refused.exit_code == 2 and "--workspace-any" in refused.stderr
    result = orch("fanout", "-m", "scripted/m", "-p", "Look around.", "--workspace", str(home),
                  "--workspace-any", "--json", env=env)
    assert result.exit_code == 0, result.output
    wire = json.dumps([r.body for r in scripted_server.requests])
    for rel, text in CONTENTS.items():
        for line in text.splitlines():
            assert line.split("=")[-1].strip() not in wire, f"{rel} reached the provider"
    results = tool_results(scripted_server.requests[-1].body)
    assert "content-ok" in results["ok"] and "content-ok" in results["g1"]
    for rid, rule in (("r1", ".env*"), ("r2", "id_*"), ("r3", "*credentials*"), ("r4", ".netrc"),
                      ("r5", "*.pem"), ("r6", ".git-credentials"), ("g2", ".ssh/"),
                      ("l2", ".ssh/")):
        assert results[rid].startswith("error: ") and f"rule {rule!r}" in results[rid]
    assert "withheld by the credential deny-list" in results["g1"]
    assert "no paths match" in results["b2"] and "'.env*'" in results["b2"]
    for listing in (results["l1"], results["b1"], results["l3"]):
        assert ".ssh" not in listing.split("[")[0] and "server.pem" not in listing.split("[")[0]
        assert "withheld by the credential deny-list" in listing
    leg = json.loads(result.stdout)["legs"][0]
    assert {r["tool"] for r in leg["workspace_refusals"]} == {"read", "grep", "list"}


def test_gitignored_paths_are_not_offered_but_can_be_read_by_name(orch, scripted_server,
                                                                  tmp_path):
    ws = tmp_path / "repo"
    (ws / ".git").mkdir(parents=True)
    (ws / "src" / "build").mkdir(parents=True)
    (ws / ".gitignore").write_text("*.log\nbuild/\n")
    (ws / "src" / ".gitignore").write_text("!keep.log\n")
    for rel in ("app.log", "src/a.py", "src/build/out.txt", "src/keep.log"):
        (ws / rel).write_text("needle here\n")
    scripted_server.script("m", Reply(tool_calls=[
        call("grep", "g", pattern="needle"), call("glob", "b", pattern="**/*"),
        call("list", "l"), call("read", "r", path="app.log"),
    ]), Reply(text="done"))
    run = orch.run_leg("m", "Find the needle.", workspace=ws)
    results = tool_results(run.bodies[-1])
    assert results["g"].splitlines()[:2] == ["src/a.py:1: needle here",
                                             "src/keep.log:1: needle here"]
    assert "2 ignored by .gitignore" in results["g"]
    assert "build" not in results["b"].split("[")[0] and "app.log" not in results["b"]
    assert "app.log" not in results["l"].split("[")[0] and ".gitignore" in results["l"]
    assert results["r"].startswith("app.log (lines 1-1 of 1)")


def test_the_deny_list_is_extended_and_overridden_in_config(orch, scripted_server, tmp_path):
    ws = tmp_path / "repo"
    (ws / "secrets").mkdir(parents=True)
    (ws / ".env.example").write_text("API_KEY=put-yours-here\n")
    (ws / "secrets" / "prod.txt").write_text("prod-secret-5e5e\n")
    orch.config(plugin_config={"workspace": {"deny": ["secrets/"], "allow": [".env.example"]}})
    scripted_server.script("m", Reply(tool_calls=[
        call("read", "a", path=".env.example"), call("read", "d", path="secrets/prod.txt"),
        call("grep", "g", pattern="prod-secret"),
    ]), Reply(text="done"))
    run = orch.run_leg("m", "q", workspace=ws)
    results = tool_results(run.bodies[-1])
    assert "put-yours-here" in results["a"]
    assert "rule 'secrets/'" in results["d"]
    assert "prod-secret-5e5e" not in json.dumps(run.bodies)


def test_nothing_under_proc_sys_or_dev_is_read_even_with_root_as_workspace():
    ws = Workspace("/")
    for path in ("proc/kmsg", "/proc/self/status", "sys/kernel", "dev/null", "/dev/zero"):
        with pytest.raises(Refused, match="/proc, /sys or /dev"):
            ws.resolve(path)
    assert ws.readable("/proc/self/status") == (None, "under /proc, /sys or /dev")
    top = []
    for path, _ in ws.walk("/"):
        if path.count("/") > 1:
            break
        top.append(path)
    assert top and not {"/proc", "/sys", "/dev"} & set(top)


def test_the_default_workspace_is_the_git_work_tree_and_never_home(orch_home, scripted_server,
                                                                   tmp_path, monkeypatch):
    orch("provider", "add", "scripted", "--base-url", scripted_server.url)
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    result = orch("fanout", "-m", "scripted/m", "-p", "q", "--json")
    assert result.exit_code == 0, result.output
    said = result.stderr.splitlines()  # the notice, then the wave's totals (also with --json)
    assert said[0] == "orch: no workspace: pass --workspace DIR to give models read access"
    assert len(said) == 2 and said[1].startswith("orch: wave ")
    assert "tools" not in scripted_server.requests[-1].body
    assert json.loads(result.stdout)["options"]["workspace"] is None
    quiet = orch("fanout", "-m", "scripted/m", "-p", "q", "--tools", "none", "-q")
    assert quiet.stderr == ""  # no tools asked for: nothing to say

    monkeypatch.setenv("HOME", str(outside))
    (outside / ".git").mkdir()  # a home that is a git work tree (dotfiles) is still home
    monkeypatch.chdir(outside)
    result = orch("fanout", "-m", "scripted/m", "-p", "q")
    assert "no workspace" in result.stderr and "tools" not in scripted_server.requests[-1].body
    for wide in (str(outside), "/"):
        refused = orch("fanout", "-m", "scripted/m", "-p", "q", "--workspace", wide)
        assert refused.exit_code == 2 and "--workspace-any" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    sent = len(scripted_server.requests)
    council = orch("council", "run", "-m", "scripted/a,scripted/b", "--chair", "scripted/c",
                   "-p", "q", "--workspace", "/")
    assert council.exit_code == 2 and "--workspace-any" in council.stderr
    assert len(scripted_server.requests) == sent


@pytest.mark.parametrize("url", [
    "http://me:s3cr3t-pass@gw.internal/v1", "https://tok-0123456789abcdef@gw.internal/v1",
    "https://gw.internal/v1?key=abc123def456", "https://gw.internal/v1?api_key=abc123def456",
    "https://gw.internal/v1?x=1&access_token=abc123def456",
])
def test_provider_add_refuses_a_base_url_that_carries_a_credential(orch_home, url):
    result = orch("provider", "add", "gw", "--base-url", url)
    assert result.exit_code == 2 and "--api-key-env" in result.stderr
    assert "abc123def456" not in result.stderr and "s3cr3t" not in result.stderr
    assert "tok-0123" not in result.stderr
    assert not (orch_home / "config.json").exists()
    assert os.environ.get("ORCH_HOME") == str(orch_home)
