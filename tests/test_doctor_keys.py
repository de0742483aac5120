"""orch doctor re-checks litellm vendor keys with one cheap authenticated call (GET /models):
accepted ok, 401/403 a fail, unreachable a warning. The scripted server stands in for the
vendor through the vendor's base-URL variable; no test reaches the internet."""

from __future__ import annotations

import json
import socket

from click.testing import CliRunner

from orchestrator.cli import cli

KEY = "sk-vendor-test-0123456789abcdefghijkl"


def rows(result) -> dict[tuple[str, str], dict]:
    return {(r["section"], r["check"]): r for r in json.loads(result.stdout)["checks"]}


def test_an_accepted_key_is_ok_and_a_refused_one_fails(orch_home, scripted_server,
                                                       monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_server.url)
    scripted_server.models_key = KEY
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    row = rows(result)[("vendor openai", "$OPENAI_API_KEY")]
    assert row["status"] == "ok" and "the key was accepted" in row["detail"]
    sent = [r for r in scripted_server.requests if r.path.endswith("/models")][-1]
    assert sent.headers["authorization"] == f"Bearer {KEY}"

    scripted_server.models_key = "sk-the-right-one-0123456789abcdefghij"
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 1
    row = rows(result)[("vendor openai", "$OPENAI_API_KEY")]
    assert row["status"] == "fail" and "HTTP 401, the key was refused" in row["detail"]
    assert KEY not in result.output


def test_an_unreachable_vendor_is_a_warning(orch_home, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}/v1")
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    row = rows(result)[("vendor anthropic", "$ANTHROPIC_API_KEY")]
    assert row["status"] == "warn" and "offline is not a broken key" in row["detail"]


def test_no_key_set_no_row_and_no_request(orch_home, scripted_server, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_server.url)
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert not [k for k in rows(result) if k[0].startswith("vendor ")]
    assert scripted_server.requests == []
