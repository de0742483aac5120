"""orch-redact, proved on the wire: what reaches the (scripted) model has no secret in it.

Written with orch's testing kit: the ``orch`` fixture runs a leg in-process against the
scripted OpenAI-compatible server and returns the request bodies that went over HTTP.
"""

from __future__ import annotations

import json

import pytest

orch_redact = pytest.importorskip("orch_redact")  # skipped only when not installed

from orchestrator.hookspecs import hookimpl  # noqa: E402
from orchestrator.testing.scripted_server import Reply  # noqa: E402
from orchestrator.tools import Tool  # noqa: E402

KEY = "sk-proj-Zx9QwErTy123456789abcdef"
GITHUB = "ghp_" + "a1B2c3D4e5" * 4


def wire(run) -> str:
    """Everything the server received, as one string."""
    return json.dumps(run.bodies)


def test_keys_emails_and_env_secrets_never_reach_the_server(orch, scripted_server,
                                                            monkeypatch):
    monkeypatch.setenv("BILLING_DB_PASSWORD", "hunter2-but-longer")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be a secret: left alone
    scripted_server.script("m", Reply(text="noted"))
    prompt = (f"Deploy with {KEY} and {GITHUB}; the DB password is hunter2-but-longer. "
              "Mail ana.lopez+ops@example.co.uk if it fails. abc stays.")
    run = orch.run_leg("m", prompt, plugins=[orch_redact])
    sent = run.bodies[0]["messages"][-1]["content"]
    assert sent == ("Deploy with [redacted key] and [redacted key]; the DB password is "
                    "[redacted $BILLING_DB_PASSWORD]. Mail [redacted email] if it fails. "
                    "abc stays.")
    assert run.leg["redactions"] == {"api_key": 2, "email": 1, "env": 1}
    # the leg's own log of the request holds the redacted text too
    logged = json.dumps(run.conversation())
    assert KEY not in logged and "ana.lopez" not in logged


# random-looking: a run of one letter reads as a placeholder, which orch lets pass
TOKEN = "q8Vd2LmX7rTz4NcW9bKp3HsY6fJg1AeU5oRi"


def test_tool_results_are_redacted_before_the_next_request(orch, scripted_server):
    class Directory:
        @hookimpl
        def register_tools(self, leg):
            return [Tool("whois", "Who owns a service.", {"type": "object", "properties": {}},
                         lambda: "owner: bob@corp.example, token ghp_" + TOKEN)]

    scripted_server.script("m", Reply(tool_calls=[{"name": "whois", "arguments": {}}]),
                           Reply(text="Bob owns it."))
    run = orch.run_leg("m", "Who owns billing?",
                       plugins=[orch_redact, ("directory", Directory())])
    assert len(run.bodies) == 2
    tool_message = run.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    # orch itself withholds the token's credential content before any plugin sees the result
    # (docs/security.md); the plugin redacts the email orch has no rule for
    first, note = tool_message["content"].split("\n")
    assert first == "owner: [redacted email], token [withheld: github-token]"
    assert note.startswith("[credential content withheld (rules: github-token)")
    assert tool_message["tool_call_id"] == run.bodies[1]["messages"][-2]["tool_calls"][0]["id"]
    assert "bob@corp.example" not in wire(run) and TOKEN not in wire(run)
    assert run.leg["redactions"] == {"email": 1}
    assert run.leg["credentials_withheld"] == {"github-token": 1}


def test_runs_after_other_plugins_so_their_additions_are_redacted_too(orch, scripted_server):
    class Signature:
        @hookimpl(tryfirst=True)
        def before_request(self, leg, request):
            extra = {"role": "user", "content": "Reply to me at dev@example.org"}
            return request.evolve(messages=[*request.messages, extra])

    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", plugins=[orch_redact, ("signature", Signature())])
    assert run.bodies[0]["messages"][-1]["content"] == "Reply to me at [redacted email]"


def test_a_clean_request_is_sent_untouched_and_nothing_is_recorded(orch, scripted_server):
    scripted_server.script("m", Reply(text="ok"))
    prompt = "Is user@host a valid address in a task-list? sk-short is not a key."
    run = orch.run_leg("m", prompt, plugins=[orch_redact])
    assert run.bodies[0]["messages"][-1]["content"] == prompt
    assert "redactions" not in run.leg


def test_settings_switch_rules_off_and_add_patterns(orch, scripted_server):
    orch.config(plugin_config={"redact": {"emails": False,
                                          "patterns": {"ticket": r"TCK-[0-9]{6}"}}})
    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "See TCK-123456, ask a@b.io", plugins=[orch_redact])
    assert run.bodies[0]["messages"][-1]["content"] == "See [redacted ticket], ask a@b.io"
    assert run.leg["redactions"] == {"ticket": 1}


def test_installed_entry_point_loads_it_as_a_third_party_plugin(orch_home):

    from click.testing import CliRunner

    from orchestrator.cli import cli

    done = CliRunner().invoke(cli, ["plugins", "--json"])
    info = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}["redact"]
    assert (info["status"], info["source"], info["builtin"]) == ("loaded", "orch-redact", False)
    assert info["hooks"] == ["before_request"] and info["version"] == "0.1.0"


def test_a_broken_pattern_refuses_the_request_instead_of_sending_it_unredacted(
        orch, scripted_server):
    orch.config(plugin_config={"redact": {"patterns": {"ticket": "TCK-[0-9"}}})  # unclosed
    scripted_server.script("m", Reply(text="never"))
    run = orch.run_leg("m", f"Use {KEY} for TCK-123456", plugins=[orch_redact])
    assert scripted_server.requests == [] and run.bodies == []
    assert run.leg["status"] == "refused"
    assert run.leg["reason"].startswith("PLUGIN_FAILED: plugin redact failed in before_request "
                                        "(error: unterminated character set")
    assert run.leg["reason"].endswith("it is fail-closed, so nothing was sent")
