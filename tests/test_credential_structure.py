"""Credential content by structure (issue 38, item 2): a private key is withheld BEGIN to END
whatever code wraps its lines, the issue's false positives pass untouched and its misses are
withheld. Through the one scanner (``withhold``), the tools that show files line by line
(``read``, ``grep``: ``block_lines``) and the real ``orch`` entry point: the scripted server's
wire holds 0 body lines of the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.security.credential_content import withhold
from orchestrator.testing.scripted_server import Reply

BEGIN, END = "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
BODY = ["MIIEowIBAAKCAQEAx3k9QzR7vT2mW8pL4nB6cF1dG5hJ0aS9eU3yK7iO2qX4Zk8Rq2Lm",
        "5Np7Wv3Xy6Tb9Hc1Jd4Fg0Ks2Me5Qa8Ur3Io6Pe9Ty2Wq5Er8Tz1ABn4Cm7Dk0El3Fj",
        "6Gh9Hi2Ig5Jf8Ke1Ld4Mc7Nb0Oa3Pz6Qy9Rx2Sw5Tv8Uu=="]


def _wrapped(style: str, body: list[str], indent: str = "") -> str:
    """A key in ``style``, the way code and documents hold one, with code around it."""
    lines = [BEGIN, *body, END]
    i = indent
    if style == "plain":
        return "\n".join(lines) + "\n"
    if style == "python-concat":  # "..." "..." inside parentheses
        return "KEY = (\n" + "\n".join(f'{i}    "{x}\\n"' for x in lines) + "\n)\nprint(KEY)\n"
    if style == "plus":  # Java, Go, JS: "..." +
        return ("String key =\n" + "\n".join(f'{i}    "{x}\\n" +' for x in lines)
                + f'\n{i}    "";\nuse(key);\n')
    if style == "leading-plus":
        return f'k = "{lines[0]}\\n"\n' + "\n".join(f'{i}  + "{x}\\n"' for x in lines[1:]) + "\n"
    if style == "js-array":
        return ("const key = [\n" + ",\n".join(f"{i}  '{x}'" for x in lines)
                + "\n].join('\\n');\nexport default key;\n")
    if style == "markdown-quote":
        return "We found this:\n\n" + "\n".join(f"> {x}" for x in lines) + "\n\nRotate it.\n"
    if style == "nested-quote":
        return "\n".join(f"> > {x}" for x in lines) + "\n"
    if style == "yaml-block":
        return "tls:\n  key: |\n" + "\n".join(f"{i}    {x}" for x in lines) + "\n  port: 443\n"
    if style == "hash-comment":
        return "# old key\n" + "\n".join(f"{i}# {x}" for x in lines) + "\nimport os\n"
    if style == "slash-comment":
        return "\n".join(f"{i}// {x}" for x in lines) + "\nint main() {}\n"
    if style == "star-comment":
        return "/*\n" + "\n".join(f"{i} * {x}" for x in lines) + "\n */\nint x;\n"
    if style == "escaped-newlines":  # one line: a JSON or Python string
        return 'PEM = "' + "\\n".join(lines) + '\\n"\nprint(PEM)\n'
    if style == "json":
        return json.dumps({"private_key": "\n".join(lines) + "\n", "email": "a@b.c"}) + "\n"
    if style == "c-continuation":
        return 'const char *k = "' + "\\n\\\n".join(lines) + '\\n";\nint y;\n'
    if style == "bytes":
        return "KEY = (\n" + "\n".join(f'{i}    b"{x}\\n"' for x in lines) + "\n)\n"
    if style == "php-dot":
        return (f'$k = "{lines[0]}\\n"\n' + "\n".join(f'{i}  . "{x}\\n"' for x in lines[1:])
                + ";\necho $k;\n")
    if style == "go-raw":
        return "var key = `" + "\n".join(lines) + "`\nfunc main() {}\n"
    if style == "xml":
        return "<config>\n  <key>" + "\n".join(lines) + "</key>\n</config>\n"
    raise ValueError(style)


STYLES = ["plain", "python-concat", "plus", "leading-plus", "js-array", "markdown-quote",
          "nested-quote", "yaml-block", "hash-comment", "slash-comment", "star-comment",
          "escaped-newlines", "json", "c-continuation", "bytes", "php-dot", "go-raw", "xml"]
SURROUNDING = {"python-concat": "print(KEY)", "plus": "use(key);", "js-array": "export default",
               "markdown-quote": "Rotate it.", "yaml-block": "port: 443",
               "hash-comment": "import os", "slash-comment": "int main()",
               "escaped-newlines": "print(PEM)", "json": '"email"', "php-dot": "echo $k;"}


@pytest.mark.parametrize("style", STYLES)
def test_a_key_is_withheld_begin_to_end_whatever_wraps_its_lines(style):
    text = _wrapped(style, BODY)
    out = withhold(text)
    assert out.rules == ("private-key",), (style, out.text)
    for line in BODY:
        assert line not in out.text, (style, out.text)
    if style in SURROUNDING:  # the code around the key is read as usual
        assert SURROUNDING[style] in out.text, (style, out.text)


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(style=st.sampled_from(STYLES), indent=st.sampled_from(["", "  ", "\t", "        "]),
       body=st.lists(st.text(_B64, min_size=16, max_size=64), min_size=1, max_size=6),
       last=st.text(_B64, min_size=4, max_size=64), pad=st.sampled_from(["", "=", "=="]),
       crlf=st.booleans())
def test_no_wrapped_key_body_survives(style, indent, body, last, pad, crlf):
    """Property: a key body of any length, in any of the wrappings, indented or not, with
    CRLF line ends or not, never reaches the model: not through ``withhold`` over the text,
    and not through ``read``/``grep``'s line view (every body line is in ``block_lines``)."""
    from orchestrator.security.credential_content import block_lines

    lines = [*body, last + pad]
    text = _wrapped(style, lines, indent)
    if crlf:
        text = text.replace("\n", "\r\n")
    out = withhold(text).text
    for line in lines:
        if len(line) >= 8:
            assert line not in out, (style, text, out)
    split = text.splitlines(keepends=True)
    keyed = block_lines(split)
    for index, shown in enumerate(split):
        if index not in keyed:
            for line in lines:
                if len(line) >= 8:
                    assert line not in shown, (style, index, shown)


@pytest.mark.parametrize("text", [
    # issue 38's false positives: identifiers with digits, counts, variables, placeholders
    "token = hashlib.sha256(data).hexdigest()",
    "api_key = settings.OPENAI_API_KEY_V2",
    "secret = base64.b64encode(raw)",
    '"total_tokens": 1234567890,',
    "max_tokens = 4096000000",
    "Authorization: Bearer $OPENAI_API_KEY",
    'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com',
    'headers = {"Authorization": f"Bearer {api_key}"}',
    "Authorization: Bearer <your-token>",
    "token: <your-token>",
    "export OPENAI_API_KEY=<your-api-key-here>",
    "model: sk-mixtral-8x7b-instruct",
    'MODEL = "sk-llama-3-70b-instruct-v2"',
    # documentation placeholders in URLs (122 in the openai and httpx packages)
    "postgresql://user:pass@localhost/db",
    "https://user:password@example.com/path",
    "postgresql://scott:tiger@localhost/test",
    "http://username:password@proxy.example.com:8080",
    "sqlalchemy.url = driver://user:pass@localhost/dbname",
    "https://***:***@proxy.com",
    "redis://:${REDIS_PASSWORD}@cache:6379/0",
    # more ordinary code the venv's packages hold
    "aws_secret_access_key=self.s3_aws_secret_access_key,",
    "cache_read_input_tokens: e.metrics.cache_read_input_tokens??0",
    '"ARN": "arn:aws:secretsmanager:us-west-2:123456789012:secret:MyTestDatabaseSecret-a1b2c3"',
    '"PasswordLastUsed": "2016-09-08T21:47:36Z",',
    '"NextToken": "abcdefg123"',
    "private_key: x25519.X25519PrivateKey",
    'api_key: os.environ/E2B_API_KEY',
    '"token-efficient-tools-2025-02-19": "token-efficient-tools-2025-02-19",',
    'key_id = "AKIAIOSFODNN7EXAMPLE"',
    "pem_header = '-----BEGIN RSA PRIVATE KEY-----'",
    '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"\n_SK_END = b"-----END OPENSSH PRIVATE KEY-----"',
    '"placeholder": "-----BEGIN RSA PRIVATE KEY-----\\n...\\n-----END RSA PRIVATE KEY-----"',
    're="-----BEGIN PRIVATE KEY-----",rs=({isEditing:e=!1})=>{let r,{t}=(0,g.f)()',
])
def test_ordinary_code_that_was_withheld_is_left_alone(text):
    assert withhold(text).text == text


@pytest.mark.parametrize("text, secret, rule", [
    ("<password>Xk9mQ2vL7pZr4wT3</password>", "Xk9mQ2vL7pZr4wT3", "secret-assignment"),
    ("<DbPassword>\n    Xk9mQ2vL7pZr4wT3\n</DbPassword>", "Xk9mQ2vL7pZr4wT3",
     "secret-assignment"),
    ("define('DB_PASSWORD', 'Rt5y7Ui9oP2aS4dF');", "Rt5y7Ui9oP2aS4dF", "secret-assignment"),
    ('System.setProperty("SERVICE_TOKEN", "Lm4Kq8Zr2Xv6Tb9N");', "Lm4Kq8Zr2Xv6Tb9N",
     "secret-assignment"),
    ('API_TOKEN = b"9f8e7d6c5b4a3f2e1d0cQx"', "9f8e7d6c5b4a3f2e1d0cQx", "secret-assignment"),
    ("secret = rb'Zq8wX2vB9nM4kL7p'", "Zq8wX2vB9nM4kL7p", "secret-assignment"),
    ("curl -H 'X-Api-Key: 7Hq2Lm9Xv4Rt8Zp3Wk6N' https://api.example.com/v1",
     "7Hq2Lm9Xv4Rt8Zp3Wk6N", "secret-assignment"),
    ('"X-Auth-Token": "a8F3kL9qZ2mX7vR4tP1w"', "a8F3kL9qZ2mX7vR4tP1w", "secret-assignment"),
    ("curl --user deploy:pQ9wTxu4Fg https://example.com", "pQ9wTxu4Fg", "curl-user"),
    ("Set-Thing -ClientSecret '2Vq7Q5VgKljZ7cb30sp0ApzvOjRIPyeTr'",
     "2Vq7Q5VgKljZ7cb30sp0ApzvOjRIPyeTr", "secret-assignment"),
    ('{"config.ini": "SERVICE_TOKEN=4b1dbRdW3rOcB7xLthrM4BTBGK\\nDEBUG=true"}',
     "4b1dbRdW3rOcB7xLthrM4BTBGK", "secret-assignment"),
    ("jira_TOKEN ?= \"ATATT3xFfGF0K3irG5tKKi-6u-wwaXQFeGwZ=C63992\"",
     "ATATT3xFfGF0K3irG5tKKi-6u-wwaXQFeGwZ=C63992", "secret-assignment"),
    ("DATABASE_URL=postgresql://app:Pg7x9Qm2Lr4v@db.internal:5432/app", "Pg7x9Qm2Lr4v",
     "url-credentials"),
    ("OPENAI_API_KEY=sk-proj-Abc123Def456Ghi789Jkl012Mno345",
     "Abc123Def456Ghi789Jkl012Mno345", "key-shape"),
    ("Authorization: Basic YXBpOmtleS1hN2MzNDJ3MzNhNWQxLTU2M2U3MjlwLTZhYjI3YzYzNzM0Ng==",
     "YXBpOmtleS1hN2MzNDJ3MzNhNWQx", "auth-header"),
])
def test_the_missed_forms_are_withheld(text, secret, rule):
    out = withhold(text)
    assert rule in out.rules and secret not in out.text, out


KEYED = _wrapped("python-concat", BODY)


def _wire(scripted_server) -> str:
    return json.dumps([r.body for r in scripted_server.requests])


def test_orch_context_sends_no_line_of_a_wrapped_key(orch, scripted_server, tmp_path):
    """The real ``orch`` entry point: ``fanout --context`` with a key wrapped as a Python
    concatenation and as a JS array sends 0 body lines; stderr says what was withheld."""
    orch.provider()
    scripted_server.script("m", Reply(text="ok"))
    (tmp_path / "keys.py").write_text(KEYED)
    (tmp_path / "key.js").write_text(_wrapped("js-array", BODY))
    env = {**os.environ, "ORCH_HOME": str(orch.home), "ORCH_DAEMON": "off"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "fanout", "-m", "scripted/m", "-p", "Review.",
         "--tools", "none", "-c", str(tmp_path / "keys.py"), "-c", str(tmp_path / "key.js")],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    wire = _wire(scripted_server)
    assert scripted_server.requests, "nothing was sent"
    assert sum(line in wire for line in BODY) == 0, wire
    assert "[withheld: private-key]" in wire and "print(KEY)" in wire and "export default" in wire
    assert "credential content withheld (rules: private-key)" in done.stderr


def test_read_and_grep_send_no_line_of_a_wrapped_key(orch, scripted_server, tmp_path):
    """The workspace tools: a whole read, a read from the middle of the key (its BEGIN not
    shown), a grep for base64 and a grep aimed into the key: 0 body lines on the wire, and
    each result says what was withheld."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "keys.py").write_text(KEYED)
    (root / "notes.md").write_text(_wrapped("markdown-quote", BODY))

    def call(name, id, **arguments):
        return {"name": name, "arguments": arguments, "id": id}

    scripted_server.script("m", Reply(tool_calls=[
        call("read", "r-all", path="keys.py"),
        call("read", "r-mid", path="keys.py", offset=3, limit=2),
        call("grep", "g-b64", pattern="[A-Za-z0-9+/]{40,}"),
        call("grep", "g-into", pattern="5Np7Wv3Xy6"),
        call("grep", "g-all", pattern=".", path="keys.py"),
        call("read", "r-md", path="notes.md"),
    ]), Reply(text="done"))
    run = orch.run_leg("m", "Look around.", workspace=root)
    assert run.leg["status"] == "complete", run.leg.get("reason")
    wire = json.dumps(run.bodies)
    assert sum(line in wire for line in BODY) == 0, wire
    results = {m["tool_call_id"]: m["content"] for m in run.bodies[-1]["messages"]
               if m["role"] == "tool"}
    assert "print(KEY)" in results["r-all"] and "Rotate it." in results["r-md"]
    assert "[withheld: private-key]" in results["r-mid"]
    assert "no matches" in results["g-into"] and "no matches" in results["g-b64"]
    for rid in ("r-all", "r-mid", "g-all", "r-md"):
        assert "credential content withheld (rules: private-key)" in results[rid], rid


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["a." * 30_000 + "!", "aB." * 20_000 + "!",
                                   "A" * 60_000 + "!", "X25519Private" * 5_000 + "!",
                                   "a_" * 30_000 + "A", "a<" * 30_000, "a$" * 30_000])
def test_a_hostile_value_takes_linear_time(value):
    """Where a credential goes, a 60 kB value shaped to make a pattern backtrack (a dotted
    path of one-letter names took exponential time): each judged in linear time."""
    for text in (f"password = {value}", f"Authorization: Bearer {value}",
                 f"https://u:{value}@host", f"<password>{value}</password>"):
        withhold(text)
