"""Hostile plugins at every call into plugin code, through the real entry points (issue 39):
a hook that refuses its cancellation, declarations that block, exit or flood, threads that
would hold the exit, a signal while ``wave_end`` blocks, an abandoned hook writing to its
leg, a guard that cannot be imported, a plugin that is off, and messages of 50 MB.

Each hostile plugin is a real installed distribution (``site``, test_plugins_loading.py).
In-process tests drive the click group (CliRunner) or the engine (the kit); what only a
process can show (its exit, its signals, its output streams) runs ``orch`` itself, one test
parametrised over the plugins that attack it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_plugin_boundary import HEAD, SWALLOWS, by_model, two_legs
from test_plugins_loading import orch_process, site  # noqa: F401 - its fixture

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]


def invoke(*args: str):
    """The click group, as a fresh ``orch`` process would run it (nothing cached)."""
    from orchestrator import runtime

    runtime.plugin_manager.cache_clear()
    runtime.config.cache_clear()
    return CliRunner().invoke(cli, list(args))


# -- a hook orch stopped waiting for ---------------------------------------------------------

LATE = HEAD + """
import orchtest_flag

@hookimpl
def before_request(leg, request):
    if bad(leg):
        from orchestrator import tool_thread

        for _ in range(1000):  # past its 0.3 s deadline, until orch stopped waiting
            time.sleep(0.01)
            if tool_thread.abandoned():
                break
        leg.set("late", "written after the deadline")
        leg.set("status", "complete")
        leg.record.status = "complete"
        leg.notice("a late notice")
        orchtest_flag.done.set()
"""


def test_an_abandoned_hooks_late_writes_are_discarded_and_noted(
        orch, scripted_server, site, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", "0.3")
    site.install("orch-test-late", "1.0", {"late": LATE},
                 modules={"orchtest_flag": "import threading\ndone = threading.Event()\n"})
    import orchtest_flag

    def after_the_late_writes(body, n):  # the wave is still running when they come
        orchtest_flag.done.wait(30)
        return Reply(text="healthy answer")

    scripted_server.script("good", after_the_late_writes)
    scripted_server.script("bad", Reply(text="never sent"))
    run = orch.run_wave(["good", "bad"], "hi", all_installed=True)
    bad = by_model(run)["bad"]
    assert orchtest_flag.done.is_set()
    assert run.doc["status"] == "partial" and run.doc["exit_code"] == 2
    assert bad["status"] == "error" and bad["reason"].startswith("PLUGIN_TIMEOUT: plugin late's")
    assert "late" not in bad and "a late notice" not in bad["notes"]
    assert [e["error"] for e in bad["plugin_errors"]] == [
        "HookTimeout: did not return within 0.3 s",
        "LateWrite: leg.set('late') after orch stopped waiting for it (PLUGIN_TIMEOUT); "
        "discarded"]
    assert run.record(2)["status"] == "error"
    assert scripted_server.count("bad") == 0


# -- what a hook must answer -----------------------------------------------------------------

ASYNC_LAUNCH = HEAD + """
AWAITED = []

@hookimpl
async def before_launch(wave, leg):
    AWAITED.append(leg.leg_id)
"""


def test_an_async_before_launch_is_refused_as_the_docs_say_never_awaited(
        orch, scripted_server, site):  # noqa: F811
    site.install("orch-test-launch", "1.0", {"launcher": ASYNC_LAUNCH})
    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", all_installed=True)
    import orchtest_launcher

    assert orchtest_launcher.AWAITED == []
    assert run.leg["status"] == "complete"
    assert "plugin launcher failed in before_launch: TypeError: before_launch must answer " \
        "synchronously, not with an awaitable (its check and what it claims happen at " \
        "once)" in run.doc["notices"]


EMPTY = HEAD + """
@hookimpl
def before_request(leg, request):
    return request.evolve(messages=[]) if bad(leg) else None
"""


@pytest.mark.parametrize("closed", [False, True], ids=["isolated", "fail-closed"])
def test_a_request_with_no_messages_is_the_plugins_failure_never_sent(
        orch, scripted_server, site, closed):  # noqa: F811
    site.install("orch-test-empty", "1.0",
                 {"emptier": ("FAIL_CLOSED = True\n" if closed else "") + EMPTY})
    run = two_legs(orch, scripted_server)
    bad = by_model(run)["bad"]
    error = "WrongAnswer: before_request returned a Request with no messages; nothing can " \
        "be sent (return None to keep the request)"
    assert bad["plugin_errors"][0] == {"plugin": "emptier", "hook": "before_request",
                                       "error": error}
    if closed:
        assert bad["status"] == "refused" and scripted_server.count("bad") == 0
    else:  # sent as the other plugins left it
        assert bad["status"] == "complete"
        assert [r.body["messages"] for r in scripted_server.requests_for("bad")][0]


HELD = HEAD + """
@hookimpl
def before_request(leg, request):
    if bad(leg):
        raise RuntimeError("the customer table is missing")
"""


def test_a_plugin_holding_a_plugin_config_section_fails_closed(
        orch, scripted_server, site):  # noqa: F811
    site.install("orch-test-cust", "1.0", {"custguard": HELD})
    orch.config(plugin_config={"custguard": {"ids": ["C-1001"]}})
    run = two_legs(orch, scripted_server)
    bad = by_model(run)["bad"]
    assert bad["status"] == "refused" and scripted_server.count("bad") == 0
    assert bad["reason"] == (
        "PLUGIN_FAILED: plugin custguard failed in before_request (RuntimeError: the customer "
        "table is missing); it holds what you set for this run, so nothing was sent")
    assert by_model(run)["good"]["status"] == "complete"


# -- declarations: register_options ---------------------------------------------------------

DECLARES = """
import sys
import time
from orchestrator.hookspecs import hookimpl

@hookimpl
def register_options(command):
    BODY
"""

OPTION_ATTACKS = {
    "blocks": "time.sleep(10**6)",
    "exits": "sys.exit(0)",
    "floods": "return ['junk'] * 10**6",
    "a-str": "return 'max-words'",
    "huge-message": "raise RuntimeError('x' * 50_000_000)",
}


@pytest.mark.parametrize("attack", sorted(OPTION_ATTACKS))
def test_register_options_is_bounded_and_said_once(
        orch, scripted_server, site, monkeypatch, attack):  # noqa: F811
    monkeypatch.setenv("ORCH_HOOK_DEADLINE_S", "0.5")
    site.install("orch-test-opts", "1.0",
                 {"declarer": DECLARES.replace("BODY", OPTION_ATTACKS[attack])})
    orch.provider()
    scripted_server.script("m", Reply(text="ok"))
    started = time.monotonic()
    helped = invoke("fanout", "--help")
    assert time.monotonic() - started < 30
    assert helped.exit_code == 0 and "--max-cost" in helped.stdout, helped.output
    said = [line for line in helped.stderr.splitlines() if "declarer" in line]
    assert len(said) == 1 and len(said[0]) < 600, helped.stderr[:2000]
    assert said[0].startswith("orch: warning: plugin declarer: register_options failed, its "
                              "options are skipped: ")
    ran = invoke("fanout", "-m", "scripted/m", "-p", "hi", "--json")
    assert ran.exit_code == 0, ran.output[:2000]
    assert json.loads(ran.stdout)["legs"][0]["answer"] == "ok"
    assert scripted_server.count("m") == 1


# -- plugins that are off ----------------------------------------------------------------------

SPENDCAP = """
import os
import pathlib
pathlib.Path(os.environ["ORCH_TEST_MARK"]).write_text("imported")

from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

@hookimpl
def register_options(command):
    return [Option("max-euros", type="float", min=0, config="max_euros",
                   help="Stop at this many euros.")]
"""


def test_a_disabled_plugin_is_not_imported_unless_the_user_set_its_value(
        orch, scripted_server, site, monkeypatch, tmp_path):  # noqa: F811
    mark = tmp_path / "imported"
    monkeypatch.setenv("ORCH_TEST_MARK", str(mark))
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "spendcap")
    site.install("orch-test-spendcap", "1.0", {"spendcap": SPENDCAP})
    orch.provider()
    orch.config(plugin_config={"workspace": {"deny": ["*.secret"]}})  # another plugin's
    scripted_server.script("m", Reply(text="ok"))
    ran = invoke("fanout", "-m", "scripted/m", "-p", "hi")
    assert ran.exit_code == 0, ran.output
    assert not mark.exists()  # disabled: not imported
    orch.config(plugin_config={"spendcap": {"max_euros": 3}})
    refused = invoke("fanout", "-m", "scripted/m", "-p", "hi")
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        "orch: error: plugin_config.spendcap.max_euros in config.json needs the spendcap "
        "plugin, which is not loaded (it is disabled by ORCH_DISABLE_PLUGINS); enable it "
        "(remove spendcap from ORCH_DISABLE_PLUGINS / plugins.disabled), or remove "
        "plugin_config.spendcap.max_euros from config.json"]
    assert mark.exists()  # read to say so: the user set its value
    assert scripted_server.count("m") == 1


def test_no_plugins_refuses_a_third_partys_budget_set_in_config(
        orch, scripted_server, site, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("ORCH_TEST_MARK", str(tmp_path / "imported"))
    site.install("orch-test-spendcap", "1.0", {"spendcap": SPENDCAP})
    orch.provider()
    orch.config(plugin_config={"spendcap": {"max_euros": 3}})
    refused = invoke("fanout", "-m", "scripted/m", "-p", "hi", "--no-plugins")
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        "orch: error: plugin_config.spendcap.max_euros in config.json needs the spendcap "
        "plugin, which is not loaded (--no-plugins loads no plugins); drop --no-plugins, or "
        "remove plugin_config.spendcap.max_euros from config.json"]
    assert scripted_server.count("m") == 0


# -- fail-closed from import on ----------------------------------------------------------------

GUARD_IMPORTS = {
    "raises, its plugin_config set": ('raise ImportError("no customer table")', True),
    "declares FAIL_CLOSED, raises": ('FAIL_CLOSED = True\nraise RuntimeError("boom")', False),
    "raises before it declares FAIL_CLOSED": (
        'raise RuntimeError("boom")\nFAIL_CLOSED = {"before_request"}', False),
    "blocks at import, its plugin_config set": ("import time\ntime.sleep(10**6)", True),
}


@pytest.mark.parametrize("case", sorted(GUARD_IMPORTS))
def test_a_guard_that_cannot_be_imported_refuses_the_run_before_anything_is_sent(
        orch, scripted_server, site, monkeypatch, case):  # noqa: F811
    source, configured = GUARD_IMPORTS[case]
    monkeypatch.setenv("ORCH_IMPORT_DEADLINE_S", "0.5")
    site.install("orch-test-custguard", "1.0", {"custguard": source})
    orch.provider()
    if configured:
        orch.config(plugin_config={"custguard": {"ids": ["C-1001"]}})
    scripted_server.script("m", Reply(text="ok"))
    refused = invoke("fanout", "-m", "scripted/m", "-p", "Customer C-1001 is angry")
    assert refused.exit_code == 1
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("orch: error:")]
    assert line.startswith("orch: error: plugin custguard could not be loaded (")
    assert line.endswith("so nothing is sent without it: fix it (`orch plugins` shows why), "
                         "or disable it to run without it (ORCH_DISABLE_PLUGINS=custguard)")
    assert scripted_server.count("m") == 0
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "custguard")  # the user's explicit choice
    assert invoke("fanout", "-m", "scripted/m", "-p", "hi").exit_code == 0


@pytest.mark.parametrize("value", ["'soon'", "0", "-5"])
def test_a_plugins_bad_hook_deadline_is_a_one_line_stop_naming_it(
        orch, scripted_server, site, value):  # noqa: F811
    site.install("orch-test-slowpoke", "1.0",
                 {"slowpoke": f"HOOK_DEADLINE_S = {value}\n" + HEAD})
    orch.provider()
    ran = invoke("fanout", "-m", "scripted/m", "-p", "hi")
    assert ran.exit_code == 1
    assert ran.stderr.splitlines() == [
        f"orch: error: plugin slowpoke declares HOOK_DEADLINE_S = {value}, which is not a "
        "number of seconds above 0; fix it in the plugin, or disable it "
        "(ORCH_DISABLE_PLUGINS=slowpoke)"]
    assert scripted_server.count("m") == 0


def test_a_plugin_slow_to_import_is_named(orch, scripted_server, site):  # noqa: F811
    site.install("orch-test-sloth", "1.0", {"sloth": "import time\ntime.sleep(2.2)\n" + HEAD})
    listed = invoke("plugins", "--json")
    assert listed.exit_code == 0
    (sloth,) = [p for p in json.loads(listed.stdout)["plugins"] if p["name"] == "sloth"]
    assert re.match(r"took 2\.\d s to import: every command that loads it waits that long "
                    r"\(import heavy modules inside its hooks, or disable it: "
                    r"ORCH_DISABLE_PLUGINS=sloth\)$", sloth["warnings"][0]), sloth
    orch.provider()
    ran = invoke("fanout", "-m", "scripted/m", "-p", "hi")  # a run says so on stderr
    assert ran.exit_code == 0 and "orch: warning: plugin sloth: took 2." in ran.stderr


# -- the process ends as orch says -------------------------------------------------------------

THREADS = HEAD + """
import threading

threading.Thread(target=time.sleep, args=(10**6,), daemon=False).start()  # at import

@hookimpl
def before_request(leg, request):
    threading.Thread(target=time.sleep, args=(10**6,), daemon=False).start()
"""

OS_EXIT = HEAD + """
import os

@hookimpl
def before_request(leg, request):
    if bad(leg):
        os._exit(0)
"""

FANOUT = ("fanout", "-m", "scripted/good,scripted/bad", "-p", "hi", "--json")
PROCESS_CASES = {
    "thread: --help": (THREADS, ("--help",), 0),
    "thread: plugins": (THREADS, ("plugins",), 0),
    "thread: a finished fanout": (THREADS, FANOUT, 0),
    "os._exit in a hook": (OS_EXIT, FANOUT, 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(PROCESS_CASES))
def test_the_exit_is_orchs(orch, scripted_server, orch_home, site, case):  # noqa: F811
    source, args, code = PROCESS_CASES[case]
    site.install("orch-test-exit", "1.0", {"hostile": source})
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="bad leg's answer"))
    started = time.monotonic()
    ran = orch_process(*args, home=orch_home, site=site)  # 120 s at most
    assert time.monotonic() - started < 60
    assert ran.returncode == code, ran.stderr
    if args == FANOUT:
        legs = {leg["model"]: leg for leg in json.loads(ran.stdout)["legs"]}
        assert {m: leg["status"] for m, leg in legs.items()} == {
            "scripted/good": "complete", "scripted/bad": "complete"}
        if source is OS_EXIT:  # the plugin's failure, said; the command went on
            assert legs["scripted/bad"]["plugin_errors"] == [{
                "plugin": "hostile", "hook": "before_request",
                "error": "PluginExit: os._exit(0) called from plugin code"}]
    else:
        assert ran.stdout.strip()


# A hostile plugin reaching orch's own event-loop thread (it patches orch's code: in-process
# plugins can): no boundary can abandon that; the hard timer ends the process all the same.
HOLDS_ORCH = HEAD + """
import os
import pathlib

@hookimpl
def leg_end(leg, record):
    if not bad(leg):
        pathlib.Path(os.environ["ORCH_TEST_MARK"] + ".good").write_text("done")

@hookimpl
def before_request(leg, request):
    if not bad(leg):
        return None
    mark = pathlib.Path(os.environ["ORCH_TEST_MARK"])
    for _ in range(400):  # the healthy leg first
        if pathlib.Path(str(mark) + ".good").exists():
            break
        time.sleep(0.01)
    from orchestrator.models import server
    original = server.Server.complete

    async def complete(self, model, request, **kwargs):
        if model.name.endswith("/bad"):
            mark.write_text("held")
            time.sleep(10**6)  # on orch's own loop thread
        return await original(self, model, request, **kwargs)

    server.Server.complete = complete
"""

WAVE_END_BLOCKS = """
import os
import pathlib
import time
from orchestrator.hookspecs import hookimpl

@hookimpl
def wave_end(wave):
    pathlib.Path(os.environ["ORCH_TEST_MARK"]).write_text("held")
    time.sleep(10**6)
"""

WAVE_END_SWALLOWS = """
import asyncio
import os
import pathlib
from orchestrator.hookspecs import hookimpl

@hookimpl
async def wave_end(wave):
    pathlib.Path(os.environ["ORCH_TEST_MARK"]).write_text("held")
    while True:
        try:
            await asyncio.sleep(3600)
        except BaseException:
            pass
"""

SWALLOWS_MARKED = SWALLOWS.replace("    while bad(leg):", """    if bad(leg):
        import os, pathlib
        pathlib.Path(os.environ["ORCH_TEST_MARK"]).write_text("held")
    while bad(leg):""")

def good_done(home: Path) -> bool:
    """Whether the healthy leg (the first) has completed, as its metadata.json says."""
    for meta in (home / "runs").glob("*-1/metadata.json"):
        try:
            return json.loads(meta.read_text()).get("status") == "complete"
        except (OSError, ValueError):
            return False
    return False


# plugin -> (what the legs are in wave.json, whether orch's hard exit wrote it)
SIGNAL_CASES = {
    "a before_request that swallows cancellation": (
        SWALLOWS_MARKED, {"scripted/good": "complete", "scripted/bad": "aborted"}, False),
    "a blocking wave_end": (
        WAVE_END_BLOCKS, {"scripted/good": "complete", "scripted/bad": "complete"}, False),
    "a wave_end that swallows cancellation": (
        WAVE_END_SWALLOWS, {"scripted/good": "complete", "scripted/bad": "complete"}, False),
    "a plugin holding orch's own loop": (
        HOLDS_ORCH, {"scripted/good": "complete", "scripted/bad": "aborted"}, True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SIGNAL_CASES))
def test_sigterm_ends_the_run_within_2_s_with_the_record_final(
        orch, scripted_server, orch_home, site, tmp_path, case):  # noqa: F811
    source, legs, hard = SIGNAL_CASES[case]
    mark = tmp_path / "held"
    site.install("orch-test-hostile", "1.0", {"hostile": source})
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="bad leg's answer"))
    env = {**os.environ, "ORCH_HOME": str(orch_home), "PYTHONPATH": str(site.path),
           "ORCH_HOOK_DEADLINE_S": "600", "ORCH_TEST_MARK": str(mark)}
    for name in ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS", "ORCH_RUNS_DIR"):
        env.pop(name, None)
    proc = subprocess.Popen([*ORCH, *FANOUT], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not (mark.exists() and good_done(orch_home)) and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), proc.communicate(timeout=5) if proc.poll() is not None else ""
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert took < 2.0, f"exit took {took:.2f} s"
    (wave_dir,) = [p for p in (orch_home / "runs").iterdir() if (p / "wave.json").exists()]
    wave = json.loads((wave_dir / "wave.json").read_text())
    assert wave["status"] != "running" and wave["signal"] == signal.SIGTERM
    assert {leg["model"]: leg["status"] for leg in wave["legs"]} == legs
    if hard:
        assert any("written by orch's hard exit" in n for n in wave["notices"])
    # --json's reader gets the document, the hard exit's too (its last words)
    doc = json.loads(out)
    assert doc["wave_id"] == wave["wave_id"] and doc["signal"] == signal.SIGTERM
    assert {leg["model"]: leg["status"] for leg in doc["legs"]} == legs
    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select model, status from spend order by model").fetchall()
    assert ("scripted/good", "complete") in rows  # every billed row
    if hard:  # the stuck leg's row waits in the outbox for the next command
        from orchestrator.ledger import outbox
        from orchestrator.ledger.spend import default_url

        assert [r["model"] for r in outbox.journaled(default_url())] == ["scripted/bad"]
    else:
        assert ("scripted/bad", legs["scripted/bad"]) in rows
    if not out:  # the hard exit leaves without printing the document
        return
    assert json.loads(out)["signal"] == signal.SIGTERM, (out[:3000], err[-3000:])


# -- 50 MB messages ----------------------------------------------------------------------------

HUGE = HEAD + """
from orchestrator.errors import Refusal

BIG = "x" * 50_000_000

@hookimpl
def register_options(command):
    raise RuntimeError(BIG)

@hookimpl
def resolve_model(spec, config):
    raise RuntimeError(BIG)

@hookimpl
def before_request(leg, request):
    if bad(leg):
        raise Refusal("HUGE", BIG)
    raise RuntimeError(BIG)

@hookimpl
def leg_end(leg, record):
    raise RuntimeError(BIG)

@hookimpl
def wave_end(wave):
    raise RuntimeError(BIG)

@hookimpl
def wave_report(wave, doc):
    raise RuntimeError(BIG)
"""


@pytest.mark.slow
def test_a_50_mb_message_is_capped_everywhere_it_is_written(
        orch, scripted_server, orch_home, site):  # noqa: F811
    site.install("orch-test-huge", "1.0", {"huge": HUGE})
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="never sent"))  # listed: a launch checks names
    ran = orch_process(*FANOUT, home=orch_home, site=site)
    assert ran.returncode == 2, ran.stderr[:2000]
    assert len(ran.stderr) < 20_000 and len(ran.stdout) < 100_000
    doc = json.loads(ran.stdout)
    bad = {leg["model"]: leg for leg in doc["legs"]}["scripted/bad"]
    assert bad["status"] == "refused" and len(bad["reason"]) < 400
    assert bad["reason"].endswith("… (50,000,000 characters)")
    files = [Path(doc["runs_dir"]) / doc["wave_id"] / "wave.json",
             *[Path(doc["runs_dir"]) / leg["leg_id"] / "metadata.json" for leg in doc["legs"]]]
    for path in files:
        assert path.stat().st_size < 100_000, path
    said = json.dumps(doc)
    assert "RuntimeError: xxx" in said and "x" * 1000 not in said
    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select length(reason) from spend").fetchall()
    assert all((length or 0) < 400 for (length,) in rows)


# -- through the daemon ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_daemon_job_whose_client_died_ends_though_its_hook_swallows_cancellation(
        orch, scripted_server, orch_home, site, tmp_path, monkeypatch):  # noqa: F811
    from orchestrator.testing.daemon import daemon_in_thread

    run_dir = tmp_path / "xdg"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    mark = tmp_path / "held"
    monkeypatch.setenv("ORCH_TEST_MARK", str(mark))
    site.install("orch-test-hostile", "1.0", {"hostile": SWALLOWS_MARKED})
    # the daemon fits a client of the same settings, its PYTHONPATH included (paths.compat)
    monkeypatch.setenv("PYTHONPATH", str(site.path))
    orch.provider()
    scripted_server.script("good", Reply(text="healthy answer"))
    scripted_server.script("bad", Reply(text="never sent"))
    with daemon_in_thread() as daemon:
        env = dict(os.environ)
        proc = subprocess.Popen([*ORCH, *FANOUT], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 90
        while not (mark.exists() and good_done(orch_home)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists() and daemon.jobs
        proc.kill()
        proc.communicate(timeout=30)
        gone = time.monotonic()
        while daemon.jobs and time.monotonic() - gone < 10:
            time.sleep(0.05)
        assert not daemon.jobs, "the job still runs"
        (wave_dir,) = [p for p in (orch_home / "runs").iterdir()
                       if (p / "wave.json").exists()]
        wave = json.loads((wave_dir / "wave.json").read_text())
        assert wave["signal"] == signal.SIGTERM
        assert {leg["model"]: leg["status"] for leg in wave["legs"]} == {
            "scripted/good": "complete", "scripted/bad": "aborted"}
        assert scripted_server.count("bad") == 0
