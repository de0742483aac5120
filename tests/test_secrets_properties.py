"""Property tests: whatever a key's variable is called and whatever the key is, once orch reads
it to send it, no byte sequence of it appears in any file under ORCH_HOME (ledger database
and WAL included), on stdout or stderr, or in any request body sent to a provider.

Channels: a provider's error body, the prompt, a context file, a model's answer, a tool
result, the chair's output, and every council stage (review, judging, chair)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_council_run import chair as council_chair
from test_council_run import script_bench, seat

from orchestrator import runtime
from orchestrator.cli import cli
from orchestrator.cli.config_cmds import _looks_like_key
from orchestrator.security.secrets import scrub, scrub_doc, scrub_values
from orchestrator.testing.kit import OFFLINE_ENV
from orchestrator.testing.scripted_server import Reply

KEY_CHARS = st.sampled_from(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/=:!@#%^*\"\\'")
keys = st.text(KEY_CHARS, min_size=16, max_size=48).filter(lambda v: v.strip() == v)
var_names = st.from_regex(r"[A-Z][A-Z0-9_]{2,24}", fullmatch=True).filter(
    lambda n: n not in os.environ and not n.startswith(("ORCH", "LITELLM", "LC_", "XDG"))
    and not _looks_like_key(n))
SLOW = settings(max_examples=6, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
_n = itertools.count()


# -- the pure scrubber, over every encoding ----------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(value=keys, user=st.text("abcdefghij:", max_size=12), noise=st.text(max_size=40))
def test_a_registered_value_never_survives_any_encoding(value, user, noise):
    from orchestrator.security.secrets import register

    register(value, "$PROPERTY_KEY")
    forms = [value, f"Bearer {value}", quote(value, safe=""), json.dumps(value),
             json.dumps({"error": {"message": f"Invalid key: {value}"}}),
             repr({"message": value}),
             "Basic " + base64.b64encode(f"{user}:{value}".encode()).decode(),
             base64.urlsafe_b64encode(f"{user}{value}".encode()).decode()]
    for form in forms:
        text = f"{noise}{form}{noise}"
        for out in (scrub(text), scrub_values(text), json.dumps(scrub_doc({"a": text}))):
            assert value not in out
    raw64 = base64.b64encode(value.encode()).decode()
    assert raw64 not in scrub_values(f"x {raw64} y")


# -- the real CLI, every channel ----------------------------------------------------------------

def _invoke(env: dict, *args: str):
    return CliRunner().invoke(cli, list(args), env=env)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_nowhere(value: str, home: Path, results, bodies) -> None:
    needle = value.encode()
    for path in home.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), f"the key is in {path.relative_to(home)}"
    for result in results:
        assert value not in result.stdout, "the key is on stdout"
        assert value not in result.stderr, "the key is on stderr"
    for body in bodies:
        assert not any(value in s for s in _strings(body)), "the key was sent in a request"


def _fresh_home(root: Path, name: str, value: str) -> tuple[Path, dict]:
    """A new ORCH_HOME, and the environment with the key under its drawn name."""
    home = root / f"home{next(_n)}"
    home.mkdir()
    runtime.config.cache_clear()
    runtime.plugin_manager.cache_clear()
    return home, {"ORCH_HOME": str(home), **OFFLINE_ENV, name: value}


def _workspace(root: Path, value: str) -> Path:
    ws = root / f"ws{next(_n)}"
    (ws / ".git").mkdir(parents=True)
    (ws / "notes.txt").write_text(f"deploy notes\nthe key is {value}\nend\n")
    return ws


@pytest.fixture
def scratch():
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


@SLOW
@given(name=var_names, value=keys)
def test_a_key_under_any_name_leaves_through_no_channel_of_a_wave(scripted_server, scratch,
                                                                  name, value):
    home, env = _fresh_home(scratch, name, value)
    n = next(_n)
    before = len(scripted_server.requests)
    srv = scripted_server
    srv.script(f"e{n}", Reply(status=401, error_message=f"Invalid key: Bearer {value}"))
    srv.script(f"a{n}", Reply(text=f"Echo: {value} / Basic "
                                   + base64.b64encode(f"me:{value}".encode()).decode()))
    srv.script(f"t{n}", Reply(tool_calls=[{"name": "read", "arguments": {"path": "notes.txt"},
                                           "id": "r"}]), Reply(text="read it"))
    srv.script(f"c{n}", Reply(text=f"Chair: the legs said {value}"))
    ws = _workspace(scratch, value)
    results = [_invoke(env, "provider", "add", "acme", "--base-url", srv.url,
                       "--api-key-env", name)]
    assert results[0].exit_code == 0, results[0].output
    models = f"acme/e{n},acme/a{n},acme/t{n}"
    wave = _invoke(env, "fanout", "-m", models, "-p", "Go.", "--chair", f"acme/c{n}",
                   "--workspace", str(ws))
    results.append(wave)
    assert wave.exit_code == 2, wave.output  # one leg failed: partial
    assert "Reason: auth: Invalid key: Bearer ***" in wave.stdout
    wave_id = json.loads((home / "runs").glob("*/wave.json").__next__().read_text())["wave_id"]
    retry = _invoke(env, "fanout", "--retry-failed", wave_id, "--json")
    results.append(retry)
    assert json.loads(retry.stdout)["legs"][0]["status"] == "error"
    results.append(_invoke(env, "spend", "--group-by", "wave"))
    results.append(_invoke(env, "status", wave_id))
    bodies = [r.body for r in srv.requests[before:] if r.path.endswith("/chat/completions")]
    tool_turn = next(b for b in bodies if b["model"].endswith(f"t{n}") and len(b["messages"]) > 2)
    assert "the key is ***" in tool_turn["messages"][-1]["content"]  # scrubbed before sending
    _assert_nowhere(value, home, results, bodies)


@SLOW
@given(name=var_names, value=keys)
def test_a_briefing_holding_the_key_is_refused_before_any_spend(scripted_server, scratch,
                                                                name, value):
    home, env = _fresh_home(scratch, name, value)
    before = len(scripted_server.requests)
    results = [_invoke(env, "provider", "add", "acme", "--base-url", scripted_server.url,
                       "--api-key-env", name)]
    in_prompt = _invoke(env, "fanout", "-m", "acme/p", "-p", f"Use this:\n{value}\nplease")
    context = scratch / f"ctx{next(_n)}.env.txt"
    context.write_text(f"a\nb\nKEY={value}\n")
    in_context = _invoke(env, "fanout", "-m", "acme/p", "-p", "Review.", "-c", str(context))
    in_council = _invoke(env, "council", "run", "-m", "acme/p,acme/q", "--chair", "acme/r",
                         "-p", "Review.", "-c", str(context))
    for result, where in ((in_prompt, "--prompt line 2"), (in_context, f"{context} line 3"),
                          (in_council, f"{context} line 3")):
        assert result.exit_code == 1, result.output
        assert where in result.stderr and f"${name}" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        results.append(result)
    assert len(scripted_server.requests) == before  # nothing was sent
    assert not (home / "ledger.db").exists()
    _assert_nowhere(value, home, results, [])


@SLOW
@given(name=var_names, value=keys)
def test_a_key_leaves_through_no_council_stage(scripted_server, scratch, name, value):
    home, env = _fresh_home(scratch, name, value)
    before = len(scripted_server.requests)

    def echoing(reply_fn):
        def reply(body, n):
            r = Reply.coerce(reply_fn(body, n))
            return replace(r, text=f"(I hold {value}.)\n\n{r.text}") if r.status == 200 else r
        return reply

    script_bench(scripted_server, alpha=echoing(seat("alpha")), bravo=echoing(seat("bravo")),
                 charlie=echoing(seat("charlie")), delta=echoing(council_chair()))
    results = [_invoke(env, "provider", "add", "scripted", "--base-url", scripted_server.url,
                       "--api-key-env", name)]
    run = _invoke(env, "council", "run", "-p", "Review the query layer.", "-m",
                  "scripted/alpha,scripted/bravo,scripted/charlie", "--chair",
                  "scripted/delta", "--tools", "none")
    results.append(run)
    assert run.exit_code == 0, run.output
    results.append(_invoke(env, "council", "run", "-p", "Again.", "-m",
                           "scripted/alpha,scripted/bravo,scripted/charlie", "--chair",
                           "scripted/delta", "--tools", "none", "--json"))
    results.append(_invoke(env, "council", "stats"))
    kinds = {r.model for r in scripted_server.requests[before:]}
    assert {"alpha", "bravo", "charlie", "delta"} <= kinds
    _assert_nowhere(value, home, results, [r.body for r in scripted_server.requests[before:]])


# -- headers a plugin or a variant adds, under names that do not look like secrets --------------

# A plugin that adds a header on every request, its name and value from the environment
# (variables whose names say nothing of a secret: the safety net of secret-named variables
# does not catch them).
HEADER_PLUGIN = """
import os
from orchestrator.hookspecs import hookimpl

@hookimpl
def before_request(leg, request):
    headers = {os.environ["HDRPLUG_HEADER"]: os.environ["HDRPLUG_VAL"]}
    return request.evolve(params={**request.params, "extra_headers": headers})
"""
header_names = st.from_regex(r"X-[A-Z][a-z]{2,8}(-[A-Z][a-z]{2,8})?", fullmatch=True).filter(
    lambda n: not re.search(r"auth|key|tok|secret|pass", n, re.I))


@pytest.fixture
def header_plugin(tmp_path, monkeypatch):
    from test_plugins_loading import Site

    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    site = Site(path)
    site.install("orch-test-headers", "1.0", {"hdrplug": HEADER_PLUGIN})
    yield site
    for name in site.modules:
        sys.modules.pop(name, None)


def _sent_header(request, name: str) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get(name.lower())


@SLOW
@given(header=header_names, value=keys)
def test_a_header_a_plugin_adds_is_never_written(scripted_server, scratch, header_plugin,
                                                 header, value):
    """The first request of the first leg too: it is logged before it is sent."""
    home, env = _fresh_home(scratch, "SCRIPTED_UNUSED", "x")
    env.update(HDRPLUG_HEADER=header, HDRPLUG_VAL=value)
    n = next(_n)
    before = len(scripted_server.chats)
    scripted_server.script(f"t{n}", Reply(tool_calls=[{"name": "list", "arguments": {},
                                                       "id": "l"}]), Reply(text="done"))
    scripted_server.script(f"u{n}", scripted_server.default)  # listed: the launch checks names
    ws = scratch / f"ws{n}"
    (ws / ".git").mkdir(parents=True)
    results = [_invoke(env, "provider", "add", "acme", "--base-url", scripted_server.url)]
    results.append(_invoke(env, "fanout", "-m", f"acme/t{n},acme/u{n}", "-p", "Go.",
                           "--workspace", str(ws), "--json"))
    assert results[-1].exit_code == 0, results[-1].output
    results.append(_invoke(env, "status", json.loads(results[-1].stdout)["wave_id"]))
    sent = scripted_server.chats[before:]  # not the launch's GET /models
    assert len(sent) == 3 and all(_sent_header(r, header) == value for r in sent)
    _assert_nowhere(value, home, results, [r.body for r in sent])


@SLOW
@given(header=header_names, value=keys)
def test_a_header_a_variant_adds_is_never_written(scripted_server, scratch, header, value):
    """config.json holds it (the user wrote it there); nothing orch writes does."""
    home, env = _fresh_home(scratch, "SCRIPTED_UNUSED", "x")
    n = next(_n)
    scripted_server.script(f"v{n}", scripted_server.default)  # listed: the launch checks names
    before = len(scripted_server.chats)
    results = [_invoke(env, "provider", "add", "acme", "--base-url", scripted_server.url)]
    config = json.loads((home / "config.json").read_text())
    config["variants"] = {"hdr": {"temperature": 0.1, "extra_headers": {header: value}}}
    (home / "config.json").write_text(json.dumps(config))
    results.append(_invoke(env, "fanout", "-m", f"acme/v{n}@hdr", "-p", "Go.", "--json"))
    assert results[-1].exit_code == 0, results[-1].output
    results.append(_invoke(env, "runs", "--json"))
    sent = scripted_server.chats[before:]  # not the launch's GET /models
    assert len(sent) == 1 and _sent_header(sent[0], header) == value
    (home / "config.json").unlink()
    _assert_nowhere(value, home, results, [r.body for r in sent])
