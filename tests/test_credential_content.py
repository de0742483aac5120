"""Credential content never reaches a provider, whatever the file is called (issue 25, item 6).

A workspace holds each case that leaked before: a token in ``.git/config``'s remote URL
(``grep(path=".git")`` searched it), ``id_ecdsa``, ``cfg/id_dsa``, ``.pgpass``,
``.vault-token``, gh's ``hosts.yml``, ``.ENV``, a ``.p12``, a hard link to ``.env``, a PEM
private key under an innocent name (read whole, read from the middle, grepped), a high-entropy
``token=`` and a provider key in ordinary files, and a third-party tool that returns a key.
The scripted server's request log holds none of their secret bytes, every refusal names its
rule, and what was withheld says which rule withheld it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from orch_plugins.workspace_paths import Refused, Workspace

from orchestrator.security.credential_content import block_lines, withhold
from orchestrator.testing.scripted_server import Reply
from orchestrator.tools import Tool

GIT_TOKEN = "ghp_R7tq2VxZ9mK4pL8wN3bC6dF1gH5jS0aE2yU7"
PEM_BODY = ["MIIEowIBAAKCAQEAx3k9QzR7vT2mW8pL4nB6cF1dG5hJ0aS9eU3yK7iO2qX4",
            "Zk8Rq2Lm5Np7Wv3Xy6Tb9Hc1Jd4Fg0Ks2Me5Qa8Ur3Io6Pe9Ty2Wq5Er8Tz1A",
            "Bn4Cm7Dk0El3Fj6Gh9Hi2Ig5Jf8Ke1Ld4Mc7Nb0Oa3Pz6Qy9Rx2Sw5Tv8Uu"]
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY)
       + "\n-----END RSA PRIVATE KEY-----\n")
SSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUssh9Qw3\n"
           "-----END OPENSSH PRIVATE KEY-----\n")
# file -> (content, the secret bytes that must never be sent)
FILES = {
    ".git/config": (f'[remote "origin"]\n\turl = https://x-access-token:{GIT_TOKEN}@github.com'
                    f'/acme/app.git\n[http]\n\textraheader = AUTHORIZATION: basic '
                    f'eC1hY2Nlc3MtdG9rZW46Z2hwX3NlY3JldA7\n', [GIT_TOKEN,
                                                                "eC1hY2Nlc3MtdG9rZW46Z2hwX3NlY3JldA7"]),
    "id_ecdsa": (SSH_KEY.replace("ssh9Qw3", "ecdsa4Rt5"), ["ecdsa4Rt5"]),
    "cfg/id_dsa": (SSH_KEY.replace("ssh9Qw3", "dsa7Yu8"), ["dsa7Yu8"]),
    ".pgpass": ("db.internal:5432:*:app:pgpass-Zq8wX2vB9nM4\n", ["pgpass-Zq8wX2vB9nM4"]),
    ".vault-token": ("hvs.vault-Kx3Lm9Pq2Rs7\n", ["vault-Kx3Lm9Pq2Rs7"]),
    ".config/gh/hosts.yml": ("github.com:\n    oauth_token: gho_HostsYml0123456789abcdefABCDEFghij\n",
                             ["HostsYml0123456789abcdef"]),
    ".ENV": ("DATABASE_PASSWORD=upper-env-Tt5Yy6Uu7\n", ["upper-env-Tt5Yy6Uu7"]),
    "certs/client.p12": ("p12-bytes-Ww2Ee3Rr4\n", ["p12-bytes-Ww2Ee3Rr4"]),
    ".env": ("OPENAI_API_KEY=hardlinked-Hh8Jj9Kk0\n", ["hardlinked-Hh8Jj9Kk0"]),
    # content, under innocent names
    "docs/deploy-key.txt": ("The deploy key, for the record:\n" + PEM + "Rotate it yearly.\n",
                            PEM_BODY),
    "settings.ini": ("[service]\nname = billing\ntoken = 9f8e7d6c5b4a3f2e1d0cQx\n",
                     ["9f8e7d6c5b4a3f2e1d0cQx"]),
    "notes.md": ("Ask ops. Old key: sk-proj-Notes0123456789abcdefABCDEF here.\n",
                 ["Notes0123456789abcdef"]),
}
HARD_LINK = "notes/meeting.txt"  # a hard link to .env


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    for rel, (text, _) in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "notes").mkdir()
    os.link(root / ".env", root / HARD_LINK)
    (root / "app.py").write_text("def main():\n    return 'ok-visible'\n")
    return root


def call(name: str, id: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments, "id": id}


def results(body: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def secrets() -> list[str]:
    return [s for _, found in FILES.values() for s in found]


LEAKY = Tool("vault_peek", "Shows a config a third-party tool found.",
             {"type": "object", "properties": {}},
             lambda: f"found: https://deploy:{GIT_TOKEN}@git.example.com/x.git and\n{PEM}")


class ThirdParty:
    NAME = "leaky"

    @staticmethod
    def register_tools(leg):
        return [LEAKY]


def test_no_credential_reaches_the_provider_and_every_refusal_names_its_rule(
        orch, scripted_server, workspace):
    from orchestrator.hookspecs import hookimpl

    ThirdParty.register_tools = staticmethod(hookimpl(ThirdParty.register_tools))
    scripted_server.script("m", Reply(tool_calls=[
        call("grep", "g-git", pattern="token|url|extraheader", path=".git"),
        call("read", "r-git", path=".git/config"),
        call("grep", "g-all", pattern="."),
        call("grep", "g-oracle", pattern="x-access-token:ghp_R"),
        call("glob", "b-all", pattern="**/*"),
        call("list", "l-root"),
        call("read", "r-ecdsa", path="id_ecdsa"), call("read", "r-dsa", path="cfg/id_dsa"),
        call("read", "r-pgpass", path=".pgpass"), call("read", "r-vault", path=".vault-token"),
        call("read", "r-gh", path=".config/gh/hosts.yml"), call("read", "r-ENV", path=".ENV"),
        call("read", "r-p12", path="certs/client.p12"),
        call("read", "r-link", path=HARD_LINK),
        call("read", "r-pem", path="docs/deploy-key.txt"),
        call("read", "r-pem-mid", path="docs/deploy-key.txt", offset=4, limit=1),
        call("grep", "g-pem", pattern=".", path="docs"),
        call("grep", "g-pem-oracle", pattern="^[A-Za-z0-9]{60}$", path="docs"),
        call("read", "r-ini", path="settings.ini"), call("read", "r-notes", path="notes.md"),
        call("vault_peek", "t-leaky"),
        call("read", "ok", path="app.py"),
    ]), Reply(text="done"))
    run = orch.run_leg("m", "Look around.", workspace=workspace, plugins=[ThirdParty])
    assert run.leg["status"] == "complete", run.leg.get("reason")
    wire = json.dumps(run.bodies)
    for secret in secrets():
        assert secret not in wire, f"{secret!r} reached the provider"
    got = results(run.bodies[-1])
    assert "ok-visible" in got["ok"]
    refused = {"r-git": "**/.git/config", "r-ecdsa": "id_*", "r-dsa": "id_*",
               "r-pgpass": ".pgpass", "r-vault": ".vault-token", "r-gh": "**/gh/hosts.yml",
               "r-ENV": ".env*", "r-p12": "*.p12",
               "r-link": "hard link to a file denied by '.env*'"}
    for rid, rule in refused.items():
        assert got[rid].startswith("error: ") and f"rule {rule!r}" in got[rid], got[rid]
    assert "withheld by the credential deny-list" in got["g-git"]
    # a pattern into a secret matches nothing: grep is no oracle for its characters
    assert "no matches" in got["g-oracle"] and "no matches" in got["g-pem-oracle"]
    for rid, rule in (("r-pem", "private-key"), ("r-pem-mid", "private-key"),
                      ("g-pem", "private-key"), ("r-ini", "secret-assignment"),
                      ("r-notes", "key-shape"), ("t-leaky", "private-key"),
                      ("t-leaky", "url-credentials")):
        assert f"[withheld: {rule}]" in got[rid], (rid, got[rid])
        assert "credential content withheld (rules:" in got[rid]
    assert "Rotate it yearly." in got["r-pem"]  # the rest of the file is read as usual
    for listing in (got["b-all"], got["l-root"]):
        shown = listing.split("\n[")[0]
        for rel in (".pgpass", ".vault-token", "id_ecdsa", ".ENV", "client.p12", "hosts.yml"):
            assert rel not in shown, (rel, listing)
    counts = run.leg["credentials_withheld"]
    assert counts["private-key"] >= 1 and counts["url-credentials"] >= 1


def test_a_context_file_is_sent_with_its_credentials_withheld(orch_home, scripted_server,
                                                              workspace, cli_runner=None):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    CliRunner().invoke(cli, ["provider", "add", "scripted", "--base-url", scripted_server.url])
    scripted_server.script("m", Reply(text="ok"))
    result = CliRunner().invoke(cli, [
        "fanout", "-m", "scripted/m", "-p", "Review these.", "--tools", "none",
        "-c", str(workspace / "docs/deploy-key.txt"), "-c", str(workspace / "settings.ini")])
    assert result.exit_code == 0, result.output
    wire = json.dumps([r.body for r in scripted_server.requests])
    for secret in [*PEM_BODY, "9f8e7d6c5b4a3f2e1d0cQx"]:
        assert secret not in wire
    assert "[withheld: private-key]" in wire and "Rotate it yearly." in wire
    assert "credential content withheld (rules: private-key)" in result.stderr


@pytest.mark.parametrize("text, rule", [
    ("url = https://x-access-token:" + GIT_TOKEN + "@github.com/o/r.git", "url-credentials"),
    ("url = https://" + "a1B2c3D4e5F6g7H8i9J0" + "@bitbucket.org/o/r.git", "url-credentials"),
    ("extraheader = AUTHORIZATION: bearer aBc9DeF2gH7kLm4Q", "auth-header"),
    ("password = \"Xk9#mQ2$vL7pZr4w\"", "secret-assignment"),
    ("export API_TOKEN=9f8e7d6c5b4a3f2e1d0c", "secret-assignment"),
    ("aws_access_key_id = AKIAZ7Q4R2M9X3LKP5TW", "aws-access-key"),
    ("slack: xoxb-284671035928-3920571846203-Qm7RtZ2xLp9VkW4nHs8JcB3d", "slack-token"),
    ("Old key: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "key-shape"),
    ("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkq\n"
     "-----END ENCRYPTED PRIVATE KEY-----", "private-key"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0Qwerty12Zx9Lm4Kq8\n=abcd\n"
     "-----END PGP PRIVATE KEY BLOCK-----", "private-key"),
    ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n"
     "AAAAIGsecret0123\nPrivate-MAC: 0a1b2c3d", "private-key"),
])
def test_each_content_rule_withholds_and_names_itself(text, rule):
    out = withhold(text)
    assert rule in out.rules and f"[withheld: {rule}]" in out.text, out


@pytest.mark.parametrize("text", [
    "password = settings.DB_PASSWORD", "token = os.environ['GITHUB_TOKEN']",
    "api_key = \"your_api_key_here\"", "password=hunter2", "token: ${{ secrets.TOKEN }}",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", "git@github.com:acme/app.git",
    "ssh://git@host.example/repo", "https://user@example.com/x", "model: sk-mixtral-8x7b",
    "sha512-Zk8Rq2Lm5Np7Wv3Xy6Tb9Hc1Jd4Fg0Ks2Me5Qa8Ur3Io6Pe9Ty2Wq5Er8Tz1A==",
    'token_url = "https://login.example.com/oauth2/token"', "author: JohnSmith1234",
    "token_path = /var/run/secrets/k8s/token1",
])
def test_ordinary_code_is_left_alone(text):
    assert withhold(text).text == text


def test_a_key_body_is_withheld_from_a_stream_that_never_shows_its_begin_line():
    lines = ["intro\n", "-----BEGIN RSA PRIVATE KEY-----\n", *[b + "\n" for b in PEM_BODY],
             "-----END RSA PRIVATE KEY-----\n", "outro\n"]
    assert block_lines(lines) == {1, 2, 3, 4, 5}
    # cut short (no END line): the key-looking lines that follow, and no further
    assert block_lines([lines[1], lines[2], "def f():\n"]) == {0, 1}


def test_deny_names_are_case_insensitive_and_dotted_id_files_are_code(tmp_path):
    for rel in ("ID_RSA", "keys/id_work", "id_ed25519.bak", "src/id_utils.py", "id_rsa.pub",
                "Secrets.PFX", "sub/.git/config", ".git/HEAD"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    ws = Workspace(tmp_path)
    for denied in ("ID_RSA", "keys/id_work", "id_ed25519.bak", "Secrets.PFX", "sub/.git/config"):
        with pytest.raises(Refused, match="credential deny-list"):
            ws.resolve(denied, want="file")
    for readable in ("src/id_utils.py", "id_rsa.pub", ".git/HEAD"):
        ws.resolve(readable, want="file")


def test_a_hard_link_to_a_home_credential_is_refused(tmp_path, monkeypatch):
    home, root = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    root.mkdir()
    (home / ".ssh" / "id_work").write_text("secret\n")
    os.link(home / ".ssh" / "id_work", root / "readme.txt")
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(Refused, match="hard link to a file denied by '~/.ssh'"):
        Workspace(root).resolve("readme.txt", want="file")


@pytest.mark.timeout(30)
def test_hostile_text_after_a_begin_line_takes_linear_time():
    """A long line of blanks after a BEGIN made the key-line pattern quadratic on ``re``
    (3,000 blanks: 0.2 s; 200,000: hours). On RE2 it is linear. (No base64 follows the
    BEGIN: there is no key to withhold.)"""
    hostile = "-----BEGIN PRIVATE KEY-----\n" + " " * 200_000 + "!\nafter\n"
    assert withhold(hostile).text == hostile
    assert block_lines(hostile.splitlines(True)) == set()
    keyed = hostile.replace("\n", "\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", 1)
    assert withhold(keyed).text.startswith("[withheld: private-key]\n" + " " * 200_000)


def test_the_cheap_prefilters_cover_every_keyword_and_key_shape():
    """The scan skips a pass when no substring it needs is there; those lists must cover
    detect-secrets' keywords and orch's key shapes, or a credential would pass unseen."""
    from detect_secrets.plugins.keyword import DENYLIST

    from orchestrator.security.credential_content import _ASSIGNMENT_STEMS, _SHAPE_PREFIXES
    from orchestrator.security.secrets import key_shape_pattern

    for keyword in [*DENYLIST, "token", "credential", "access_?key"]:
        plain = keyword.replace("_?", "")
        assert any(stem in plain for stem in _ASSIGNMENT_STEMS), keyword
    # every alternative of the key-shape pattern starts with a listed prefix
    for example in ["sk-proj-Abcdefghij0123456789xyz", "pk-Abcdefghij0123456789xyzab",
                    "rk-Abcdefghij0123456789xyzab", "ak-Abcdefghij0123456789xyzab",
                    "sk_live_Abcdefghij0123456789", "AIza" + "A1" * 17 + "B",
                    "ghp_" + "a1" * 18, "github_pat_" + "a1" * 20, "xai-" + "a1" * 20,
                    "gsk_" + "a1" * 20, "nvapi-" + "a1" * 20, "pplx-" + "a1" * 20]:
        import re

        assert re.search(key_shape_pattern(), example), example
        assert any(example.startswith(p) for p in _SHAPE_PREFIXES), example
        assert withhold(f"x {example} y").rules, example
    # a tripwire: a new shape in orchestrator.security.secrets changes this; add its example above
    assert len(key_shape_pattern().split("|")) == 13
