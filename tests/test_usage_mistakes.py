"""Every usage mistake exits 2 with one line and no traceback, on every path: click's own
(an unknown option or command, a bad value) and orch's (a file that is not there, a model or
run that does not exist, a prompt given twice), whether a local model or a provider's is
mistyped. The set-up's problems (a missing key) stay exit 1."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.daemon import client

MISTAKES = [
    (["fanout", "-m", "scripted/a", "-p", "q", "--context", "nosuch.py"], "does not exist"),
    (["fanout", "-m", "scripted/a", "-p", "q", "--context", "/dev/zero"], "not a regular file"),
    (["fanout", "-m", "scripted/a", "-p", "q", "--context", "."], "is a directory"),
    (["fanout", "-m", "scripted/a", "-f", "nosuch.md"], "does not exist"),
    (["fanout", "-m", "scripted/a", "-p", "  "], "briefing is empty"),
    (["fanout", "-m", "local/gemma3-27b", "-p", "q"], "no local model 'gemma3-27b'"),
    (["fanout", "-m", "nosuchprov/m", "-p", "q"], "does not know the provider"),
    (["fanout", "-m", "nope", "-p", "q"], "has no provider"),
    (["fanout", "-m", "scripted/a@lukewarm", "-p", "q"], "unknown variant @lukewarm"),
    (["fanout", "-m", ",,", "-p", "q"], "names no model"),
    (["fanout", "--council", "ghost", "-p", "q"], "no saved council 'ghost'"),
    (["fanout", "-m", "scripted/a", "-p", "q", "--rounds", "0"], "Invalid value for '--rounds'"),
    (["fanout", "-m", "scripted/a", "-p", "q", "--bogus"], "No such option '--bogus'"),
    (["fanout", "-m", "scripted/a", "-p", "q", "why"], "given twice"),
    (["fanout", "-m", "scripted/a", "why", "flaky"], "quote it as one"),
    (["fanout", "-m", "scripted/a", "-p", "q", "--workspace", "nowhere"], "not a directory"),
    (["fanout", "--retry-failed", "20990101-000000-0123456789abcdef"], "no wave"),
    (["council", "run", "-m", "scripted/a,scripted/b", "-p", "q"], "no chair"),
    (["council", "run", "-m", "scripted/a", "--chair", "scripted/c", "-p", "q"], "2 seats"),
    (["status", "nosuchrun"], "no run 'nosuchrun'"),
    (["runs", "--since", "last tuesday"], "cannot read --since"),
    (["spend", "--since", "bogus"], "cannot read --since"),
    (["bench", "--config", "nosuch.toml"], "does not exist"),
    (["provider", "add", "p", "--base-url", "ftp://x"], "must start with http"),
    (["alias", "remove", "ghost"], "no alias 'ghost'"),
    (["local", "remove", "ghost"], "no added local model"),
    (["local", "nosuch"], "No such command 'nosuch'"),
    (["serv"], "Did you mean 'serve'?"),
    (["--bogus"], "No such option '--bogus'"),
]


@pytest.mark.parametrize("args, fragment", MISTAKES, ids=[" ".join(a)[:40] for a, _ in MISTAKES])
def test_a_usage_mistake_is_one_line_exit_2(orch, scripted_server, args, fragment):
    orch.provider()
    result = CliRunner().invoke(cli, args, input="")
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("orch: error: ") and fragment in lines[0]
    assert scripted_server.count() == 0


def test_a_missing_key_is_the_set_up_not_a_usage_mistake(orch, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(cli, ["fanout", "-m", "openai/gpt-4o-mini", "-p", "q"])
    assert result.exit_code == 1 and "OPENAI_API_KEY" in result.stderr


def test_the_real_entry_point_says_a_usage_mistake_in_one_line(orch_home):
    """Once through `orch` itself: click's usage block is one line there too, named orch."""
    unknown = client(["fanout", "--modles", "a/b"])
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert unknown.stderr.startswith("orch: error: No such option '--modles'. (Did you mean ")
    assert "'--models'" in unknown.stderr and unknown.stderr.count("\n") == 1
    assert unknown.stderr.endswith(" (`orch fanout -h` lists what it takes)\n")
    missing = client(["fanout", "-m", "a/b", "-p", "q", "--context", "nosuch.py"])
    assert missing.exit_code == 2
    assert missing.stderr == "orch: error: --context nosuch.py does not exist; check the path\n"
