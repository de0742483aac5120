"""Hostile plugins behind the hook boundary (hooks.py): a hook that blocks, never returns,
answers the wrong type, exits, or raises where nobody thought to look never stops orch. The
leg it touched ends (or goes on without its change) with the plugin named once; the other leg
completes; a signal still ends the process at once with every ledger row.

Each hostile plugin is a real installed distribution (``site`` from test_plugins_loading)
that misbehaves only on the leg of ``scripted/bad``; ``scripted/good`` is the healthy leg.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from test_plugins_loading import orch_process, site  # noqa: F401 - its fixture

from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]
BUILTINS = {"tiers", "rosters", "workspace", "output_budget", "context_guard", "turn_budget",
            "cost_ceiling", "doom_loop", "json_repair", "text_tools", "local"}

HEAD = """
import time
import anyio
from orchestrator.hookspecs import hookimpl

def bad(leg):
    return leg.model.name.endswith("/bad")
"""

BLOCKING = HEAD + """
@hookimpl
def before_request(leg, request):
    if bad(leg):
        time.sleep(10**6)
"""

NEVER_RETURNS = HEAD + """
@hookimpl
async def before_request(leg, request):
    if bad(leg):
        await anyio.sleep_forever()
"""

# An async hook that refuses its cancellation, as a retry loop written carelessly does: it
# used to hold the run (and its exit) until killed.
SWALLOWS = HEAD + """
import asyncio

@hookimpl
async def before_request(leg, request):
    while bad(leg):
        try:
            await asyncio.sleep(3600)
        except BaseException:
            pass
"""

BARE_EXCEPT = HEAD + """
import asyncio

@hookimpl
async def before_request(leg, request):
    while bad(leg):
        try:
            await asyncio.sleep(3600)
        except:  # noqa: E722
            continue
"""

# blocking code inside `async def`: it holds its own thread, never the legs' loop
ASYNC_BLOCKS = HEAD + """
@hookimpl
async def before_request(leg, request):
    if bad(leg):
        time.sleep(10**6)
"""

# hook -> a hostile implementation answering the wrong type on the bad leg
WRONG = {
    "before_request": """
@hookimpl
def before_request(leg, request):
    return {"messages": []} if bad(leg) else None
""",
    "after_response": """
@hookimpl
def after_response(leg, request, response):
    return "junk" if bad(leg) else None
""",
    "tool_roster": """
@hookimpl
def tool_roster(leg, tools):
    return {"read": 1} if bad(leg) else None
""",
    "register_tools": """
@hookimpl
def register_tools(leg):
    return ["junk"] if bad(leg) else None
""",
    "system_prompt": """
@hookimpl
def system_prompt(leg):
    return 12345 if bad(leg) else None
""",
    "async": """
@hookimpl
async def after_response(leg, request, response):
    await anyio.sleep(0)
    return {"text": "junk"} if bad(leg) else None
""",
    "wrapper": """
@hookimpl(wrapper=True)
def before_request(leg, request):
    final = yield
    return ["not", "a", "request"] if bad(leg) else final
""",
}


def two_legs(orch, scripted_server, **spec):
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="bad leg's answer"))
    return orch.run_wave(["good", "bad"], "hi", all_installed=True, **spec)


def by_model(run) -> dict[str, dict]:
    return {leg["model"].split("/")[-1]: leg for leg in run.legs}


@pytest.mark.parametrize("hook", sorted(WRONG))
def test_a_wrong_answer_is_discarded_and_only_its_plugin_is_named(
        orch, scripted_server, site, hook):  # noqa: F811
    site.install("orch-test-hostile", "1.0", {"hostile": HEAD + WRONG[hook]})
    run = two_legs(orch, scripted_server)
    legs = by_model(run)
    assert run.doc["status"] == "complete", [leg["reason"] for leg in run.legs]
    assert legs["good"]["answer"] == "healthy answer" and legs["good"]["plugin_errors"] == []
    assert legs["bad"]["answer"] == "bad leg's answer"  # sent as the other plugins left it
    errors = legs["bad"]["plugin_errors"]
    assert [(e["plugin"], e["hook"]) for e in errors] == [
        ("hostile", {"wrapper": "before_request", "async": "after_response"}.get(hook, hook))]
    assert errors[0]["error"].startswith("WrongAnswer: ")
    assert not BUILTINS & {e["plugin"] for leg in run.legs for e in leg["plugin_errors"]}
    if hook == "system_prompt":  # the number was not sent as the system message
        bad_bodies = [r.body for r in run.requests if r.body["model"].endswith("bad")]
        assert all(m["role"] != "system" or isinstance(m["content"], str)
                   for m in bad_bodies[0]["messages"])
        assert 12345 not in [m["content"] for m in bad_bodies[0]["messages"]]


@pytest.mark.parametrize("source", [BLOCKING, NEVER_RETURNS, SWALLOWS, BARE_EXCEPT, ASYNC_BLOCKS],
                         ids=["blocks", "never-returns", "swallows-cancellation",
                              "bare-except-loop", "async-blocks-its-thread"])
def test_a_hook_past_its_deadline_ends_its_leg_only(
        orch, scripted_server, site, monkeypatch, source):  # noqa: F811
    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", "0.5")
    site.install("orch-test-hostile", "1.0", {"hostile": source})
    t0 = time.monotonic()
    run = two_legs(orch, scripted_server, timeout_s=60)
    assert time.monotonic() - t0 < 20
    legs = by_model(run)
    assert run.doc["status"] == "partial" and run.doc["exit_code"] == 2
    assert legs["good"]["status"] == "complete"
    assert legs["bad"]["status"] == "error"
    assert legs["bad"]["reason"].startswith(
        "PLUGIN_TIMEOUT: plugin hostile's before_request did not return within 0.5 s")
    assert legs["bad"]["plugin_errors"] == [{"plugin": "hostile", "hook": "before_request",
                                             "error": "HookTimeout: did not return within "
                                                      "0.5 s"}]
    assert scripted_server.count("bad") == 0  # the request it held was never sent


WAVE_LEVEL = HEAD + """
@hookimpl
def wave_start(wave):
    time.sleep(10**6)

@hookimpl
def before_launch(wave, leg):
    if bad(leg):
        time.sleep(10**6)
"""


def test_wave_level_hooks_past_their_deadline_end_only_their_call(
        orch, scripted_server, site, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", "0.5")  # wave hooks too, when the user sets it
    site.install("orch-test-hostile", "1.0", {"hostile": WAVE_LEVEL})
    run = two_legs(orch, scripted_server)
    legs = by_model(run)
    assert "plugin hostile failed in wave_start: HookTimeout: did not return within 0.5 s" \
        in run.doc["notices"]
    assert legs["good"]["status"] == "complete"
    assert legs["bad"]["status"] == "refused" and scripted_server.count("bad") == 0
    assert legs["bad"]["reason"].startswith(
        "PLUGIN_TIMEOUT: plugin hostile's before_launch did not return within 0.5 s")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_deadline_setting_is_one_line_naming_it(monkeypatch, value):
    from orchestrator.errors import OrchError
    from orchestrator.plugin_host.deadline import hook_deadline_s

    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", value)
    with pytest.raises(OrchError, match=r"^ORCH_HOOK_DEADLINE_S must be a number of seconds "
                                        r"above 0 \(got '" + value + r"'\); fix it or unset it"):
        hook_deadline_s()


def test_a_bad_deadline_in_config_stops_the_command_in_one_line(orch, orch_home, site):  # noqa: F811
    orch.provider()
    orch.config(plugins={"hook_deadline_s": 0})
    ran = orch_process("fanout", "-m", "scripted/m", "-p", "hi", home=orch_home, site=site)
    assert ran.returncode == 1
    assert ran.stderr.splitlines() == [
        "orch: error: plugins.hook_deadline_s in config.json must be a number of seconds above "
        "0 (got 0); fix it or unset it for the default 5 s"]


EXITS = HEAD + """
import sys

@hookimpl
def before_request(leg, request):
    if bad(leg):
        sys.exit(0)
"""


def test_a_hook_that_exits_is_its_plugins_failure_not_the_commands(orch, scripted_server,
                                                                     site):  # noqa: F811
    site.install("orch-test-hostile", "1.0", {"hostile": EXITS})
    run = two_legs(orch, scripted_server)
    assert run.doc["status"] == "complete"
    errors = by_model(run)["bad"]["plugin_errors"]
    assert errors == [{"plugin": "hostile", "hook": "before_request",
                       "error": "PluginExit: SystemExit: 0"}]


# -- fail closed -------------------------------------------------------------------------------

PII_GUARD = HEAD + """
FAIL_CLOSED = True  # a guard with a bug must not let the data through

@hookimpl
def before_request(leg, request):
    if bad(leg):
        raise KeyError("the pattern table is missing")  # the bug
    return None
"""


def test_a_fail_closed_guard_with_a_bug_refuses_and_nothing_reaches_the_wire(
        orch, scripted_server, site):  # noqa: F811
    site.install("orch-test-guard", "1.0", {"pii": PII_GUARD})
    run = two_legs(orch, scripted_server)
    legs = by_model(run)
    assert scripted_server.count("bad") == 0
    assert legs["bad"]["status"] == "refused" and legs["bad"]["requests"] == 0
    assert legs["bad"]["reason"] == (
        "PLUGIN_FAILED: plugin pii failed in before_request (KeyError: 'the pattern table is "
        "missing'); it is fail-closed, so nothing was sent")
    assert legs["bad"]["plugin_errors"][0]["plugin"] == "pii"
    assert legs["good"]["status"] == "complete"
    assert run.doc["exit_code"] == 2


def test_a_fail_closed_guard_refuses_on_a_timeout_and_a_wrong_answer_too(
        orch, scripted_server, site, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", "0.5")
    site.install("orch-test-guard", "1.0", {
        "slowguard": "FAIL_CLOSED = {'before_request'}\n" + BLOCKING,
        "typoguard": "FAIL_CLOSED = True\n" + HEAD + WRONG["before_request"]})
    run = two_legs(orch, scripted_server)
    bad = by_model(run)["bad"]
    assert bad["status"] == "refused" and scripted_server.count("bad") == 0
    # third parties run in reverse name order: typoguard is asked first
    assert bad["reason"].startswith("PLUGIN_FAILED: plugin typoguard failed in before_request "
                                    "(WrongAnswer: before_request returned a dict;")


# -- hooks at the command's edges ----------------------------------------------------------

DEFAULTS_RAISE = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def default_models(config):
    raise RuntimeError("no defaults today")
"""

DEFAULTS_WRONG = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def default_models(config):
    return ["scripted/m"]
"""

DEFAULTS_GOOD = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def default_models(config):
    return {"models": ["scripted/m"], "notice": "orch: running scripted/m by default"}
"""


def test_default_models_is_isolated_like_every_hook(orch, scripted_server, orch_home, site):  # noqa: F811
    # third parties are asked in reverse name order: both hostile ones before the good one
    site.install("orch-test-defaults", "1.0", {"zraise": DEFAULTS_RAISE,
                                               "ywrong": DEFAULTS_WRONG, "agood": DEFAULTS_GOOD})
    orch.provider()
    scripted_server.script("m", Reply(text="default answer"))
    ran = orch_process("fanout", "-p", "hi", "--json", home=orch_home, site=site,
                       ORCH_DISABLE_PLUGINS="local")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["legs"][0]["answer"] == "default answer"
    *said, totals = ran.stderr.splitlines()
    assert said == [
        "orch: warning: plugin zraise: default_models failed and was skipped: RuntimeError: "
        "no defaults today",
        "orch: warning: plugin ywrong: default_models failed and was skipped: WrongAnswer: "
        "default_models returned a list; it must return {\"models\": [names], \"notice\": "
        "\"one line\"} or None",
        "orch: running scripted/m by default"]
    assert totals.startswith("orch: wave ")  # the run's closing line, also with --json


RESOLVER_WRONG = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def resolve_model(spec, config):
    return "junk"
"""


def test_resolve_model_answering_a_str_is_skipped_not_an_internal_error(
        orch, scripted_server, orch_home, site):  # noqa: F811
    site.install("orch-test-resolver", "1.0", {"resolver": RESOLVER_WRONG})
    orch.provider()
    ran = orch_process("fanout", "-m", "scripted/m", "-p", "hi", "--json", home=orch_home,
                       site=site)
    assert ran.returncode == 0, ran.stderr
    assert "internal error" not in ran.stderr
    *said, totals = ran.stderr.splitlines()
    assert said == [
        "orch: warning: plugin resolver: resolve_model failed and was skipped: WrongAnswer: "
        "resolve_model returned a str; it must return a ResolvedModel or None"]
    assert totals.startswith("orch: wave ")  # the run's closing line, also with --json


COMMANDS_BLOCK = """
import time
from orchestrator.hookspecs import hookimpl

@hookimpl
def register_commands(cli):
    time.sleep(10**6)
"""

COMMANDS_EXIT = """
import sys
from orchestrator.hookspecs import hookimpl

@hookimpl
def register_commands(cli):
    sys.exit(3)
"""


def test_register_commands_that_blocks_or_exits_is_skipped_and_the_cli_starts(
        orch_home, site):  # noqa: F811
    site.install("orch-test-commands", "1.0", {"stuck": COMMANDS_BLOCK,
                                               "quitter": COMMANDS_EXIT})
    t0 = time.monotonic()
    ran = orch_process("--help", home=orch_home, site=site, ORCH_HOOK_DEADLINE_S="1")
    assert time.monotonic() - t0 < 30
    assert ran.returncode == 0 and "fanout" in ran.stdout, ran.stderr
    assert sorted(ran.stderr.splitlines()) == [
        "orch: warning: plugin quitter: register_commands failed, its commands are skipped: "
        "PluginExit: SystemExit: 3",
        "orch: warning: plugin stuck: register_commands failed, its commands are skipped: "
        "HookTimeout: did not return within 1 s"]


# -- the real command ---------------------------------------------------------------------

@pytest.mark.slow
def test_the_command_names_a_blocking_plugin_once_per_leg_and_exits_2(
        orch, scripted_server, orch_home, site):  # noqa: F811
    site.install("orch-test-hostile", "1.0", {"hostile": BLOCKING})
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="never sent"))  # listed: a launch checks names
    ran = orch_process("--log-json", "fanout", "-m", "scripted/good,scripted/bad,scripted/bad",
                       "-p", "hi", "--json", home=orch_home, site=site,
                       ORCH_HOOK_DEADLINE_S="1", LOG_LEVEL="info")
    assert ran.returncode == 2, ran.stderr
    doc = json.loads(ran.stdout)
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "error", "error"]
    for leg in doc["legs"][1:]:  # its leg names the plugin and the hook, once
        assert "hostile" in leg["reason"] and "before_request" in leg["reason"], leg["reason"]
        assert [(e["plugin"], e["hook"]) for e in leg["plugin_errors"]] == [
            ("hostile", "before_request")]
    warnings = [json.loads(line) for line in ran.stderr.splitlines()
                if '"plugin_error"' in line]
    assert sorted((w["plugin"], w["leg_id"]) for w in warnings) == sorted(
        ("hostile", leg["leg_id"]) for leg in doc["legs"][1:])
    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select status from spend order by status").fetchall()
    assert rows == [("complete",), ("error",), ("error",)]
    assert scripted_server.count("bad") == 0  # the blocked hook ended its legs before a send


@pytest.mark.slow
@pytest.mark.parametrize("source", [BLOCKING, NEVER_RETURNS], ids=["blocks", "never-returns"])
def test_sigterm_while_a_hook_blocks_exits_within_2_s_with_every_ledger_row(
        orch, scripted_server, orch_home, site, source):  # noqa: F811
    site.install("orch-test-hostile", "1.0", {"hostile": source})
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="never sent"))  # listed: a launch checks names
    env = {**os.environ, "ORCH_HOME": str(orch_home), "PYTHONPATH": str(site.path),
           "ORCH_HOOK_DEADLINE_S": "600"}
    for name in ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS", "ORCH_RUNS_DIR"):
        env.pop(name, None)
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/good,scripted/bad", "-p", "hi",
                             "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while scripted_server.count("good") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert scripted_server.count("good") == 1, "the healthy leg ran while the hook blocked"
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert took < 2.0, f"exit took {took:.2f} s"
    doc = json.loads(out)
    wave = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert wave["status"] == "partial" and wave["signal"] == signal.SIGTERM
    assert {leg["model"]: leg["status"] for leg in wave["legs"]} == {
        "scripted/good": "complete", "scripted/bad": "aborted"}
    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select model, status from spend order by model").fetchall()
    assert rows == [("scripted/bad", "aborted"), ("scripted/good", "complete")]
    assert scripted_server.count("bad") == 0
