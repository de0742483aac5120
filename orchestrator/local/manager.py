"""The one local server per machine user: found if running, started if not, stopped on demand.

Every orch process calls :func:`ensure` before it sends a ``local/...`` request. Under the
server lock it reads the state file, health-checks the server and returns it; if there is
none it verifies the GGUF files, picks a port, launches the supervisor
(:mod:`orchestrator.local.supervisor`) and waits until the server answers. Two invocations
starting at once therefore end with one server: the second waits for the lock and finds the
first one's server running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.local import llama_server as llama
from orchestrator.local import state as st
from orchestrator.local.model import LocalModel, catalogue, prepare
from orchestrator.local.server_choice import Choice, choose
from orchestrator.local.settings import HOST, LocalSettings, with_threads
from orchestrator.security.secrets import _SECRET_NAME, secret_values

MAX_RESTARTS, WINDOW_S = 3, 300.0  # restarts allowed in the window, then a clear error
PORT_ATTEMPTS = 3
IN_USE = "address already in use"


class _PortTaken(Exception):
    """The server could not bind its port (someone took it between our check and its bind)."""


def ensure(settings: LocalSettings, need: Collection[str] = (), *, slots: int = 1,
           retry_failed: bool = False,
           abandoned: Callable[[], bool] = lambda: False) -> tuple[dict[str, Any], bool]:
    """The running server's state (starting it first if needed) and whether this call started
    it. ``need``: the alias the wave uses (one server holds one model). ``slots``: how many
    legs will decode at once; the server gets min(slots, ``local.max_slots``), and a running
    one with fewer is restarted for more when no slot is busy. ``retry_failed``: start again
    even if the server failed within the restart window (``orch local start``). Notices for
    the user (a moved model file) come back in the state's ``notices``. ``abandoned()``
    true: nobody waits any more (an interrupted job in ``orch serve``, where this thread
    outlives it): stop waiting and let go of the lock, undoing a start this call began, so
    the next job goes on and no untracked server is left (:class:`state.Abandoned`)."""
    alias = _one_alias(settings, need)
    want = max(1, min(slots, settings.max_slots))
    with st.server_lock(settings.start_timeout_s + 30, abandoned=abandoned):
        st.touch_last_used()
        state = st.read_state()
        if state is not None and st.is_supervisor(state.get("pid")):
            state = _wait_ready(state["pid"], settings.start_timeout_s, abandoned)
            _check_served(state, need)
            if (state.get("slots") or want) >= want or not _idle(state):
                return state, False
            _stop_locked(state, 15.0)
            state = None
        if state is not None:
            _clear_stale(state, retry_failed)
        notices: list[str] = []
        t0 = time.monotonic()
        state = _launch(settings, alias, want, notices, abandoned)
        _check_served(state, need)
        st.touch_last_used()
        return {**state, "notices": notices, "start_s": round(time.monotonic() - t0, 1)}, True


def status() -> dict[str, Any]:
    """What ``orch local status`` shows: the state file plus a live health check."""
    state = st.read_state()
    if state is None:
        return {"status": "stopped"}
    doc = dict(state)
    alive = st.is_supervisor(state.get("pid"))
    if not alive and state.get("status") != st.FAILED:
        doc["status"] = "stopped"
        doc["note"] = "the supervisor is gone (stale state; the next use starts a new server)"
    if alive:
        health, models = st.probe(state["host"], state["port"])
        doc["health"] = health
        if models is not None:
            doc["served"] = models
    used = st.last_used()
    doc["last_used_s_ago"] = None if used is None else round(time.time() - used, 1)
    return doc


def stop(timeout_s: float = 15.0) -> dict[str, Any] | None:
    """Stop the server (and its supervisor); the state it had, or None if none was running."""
    with st.server_lock(timeout_s + 30):
        state = st.read_state()
        if state is None:
            return None
        _stop_locked(state, timeout_s)
        return state


def _stop_locked(state: dict[str, Any], timeout_s: float) -> None:
    pid = state.get("pid")
    if st.is_supervisor(pid):
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, timeout_s):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
    _kill_orphan(state)
    st.clear_state()


def _one_alias(settings: LocalSettings, need: Collection[str]) -> str:
    if len(set(need)) > 1:
        raise OrchError(f"one local server holds one model, and this wave uses "
                        f"{', '.join(f'local/{a}' for a in sorted(set(need)))}; run them in "
                        "separate waves (variants of one model share it: local/NAME@hot)")
    return next(iter(need), None) or settings.default_alias


def _idle(state: dict[str, Any]) -> bool:
    """No slot of the running server is generating (llama-server's ``GET /slots``); a server
    that cannot say counts as busy, so nobody's request is cut off."""
    try:
        with st.NO_PROXY.open(f"http://{state['host']}:{state['port']}/slots",
                              timeout=2.0) as resp:
            slots = json.load(resp)
    except (OSError, ValueError):
        return False
    return isinstance(slots, list) and not any(s.get("is_processing") for s in slots)


class Lease:
    """Keeps the server from stopping for idleness while a wave uses it: touches last-used
    now and every ``every_s`` until closed (a daemon thread; nothing to clean up on a crash)."""

    def __init__(self, idle_s: float) -> None:
        self.every_s = max(0.2, min(30.0, idle_s / 3)) if idle_s > 0 else 30.0
        self._done = threading.Event()
        st.touch_last_used()
        self._thread = threading.Thread(target=self._run, name="orch-local-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.every_s):
            st.touch_last_used()

    def close(self) -> None:
        self._done.set()
        st.touch_last_used()


# -- starting ------------------------------------------------------------------------------
def _launch(settings: LocalSettings, alias: str, slots: int, notices: list[str],
            abandoned: Callable[[], bool]) -> dict[str, Any]:
    settings = with_threads(settings)  # the cores free now, as it starts
    models = catalogue(settings.models)
    if alias not in models:
        raise OrchError(f"no local model {alias!r} (known: {', '.join(sorted(models))})")
    model = models[alias]
    _say_starting(settings, alias, slots)
    choice = None if settings.server_command else choose(settings.server)
    path = prepare(model, notices)
    for _attempt in range(PORT_ATTEMPTS):
        port = _pick_port(settings)
        pid = _spawn(settings, model, path, port, slots, choice)
        try:
            return _wait_ready(pid, settings.start_timeout_s, abandoned)
        except st.Abandoned:
            _undo_start(pid)
            raise
        except _PortTaken:
            st.clear_state(pid)
            if settings.port:
                raise OrchError(_port_message(port)) from None
    raise OrchError(f"could not find a free port for the local server in {PORT_ATTEMPTS} "
                    f"tries; set `local.port` in config.json (see {st.log_path()})")


def _say_starting(settings: LocalSettings, alias: str, slots: int) -> None:
    """The cold start's first line, said before anything slow (the model file, the server's
    start): a run that waits for the server is never silent, with ``--json`` too."""
    from orchestrator.notices import say

    threads = settings.n_threads
    say(f"starting the local model server for local/{alias} ({slots} slot"
        f"{'s' * (slots != 1)}, {threads} thread{'s' * (threads != 1)}); the first answer "
        "waits for it")


def _pick_port(settings: LocalSettings) -> int:
    if settings.port:
        if port_in_use(settings.port):
            raise OrchError(_port_message(settings.port))
        return settings.port
    for _ in range(20):
        port = free_port()
        if not port_in_use(port):
            return port
    raise OrchError("no free port on 127.0.0.1 for the local server; set `local.port`")


def _port_message(port: int) -> str:
    return (f"port {port} on {HOST} is already in use, so the local server cannot listen "
            "there; set `local.port` in config.json to a free port, or to 0 to let orch pick one")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def port_in_use(port: int) -> bool:
    """Something listens on ``port``. ``SO_REUSEADDR`` as the server's own bind has it: the
    TIME-WAIT sockets a server leaves for a minute after it stops do not count, so a fixed
    ``local.port`` starts again at once after ``orch local stop`` or a restart for slots."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def server_argv(settings: LocalSettings, model: LocalModel, path: Path, port: int,
                slots: int, program: list[str] | None, cpu_path: str) -> list[str]:
    """llama.cpp's server (``program``: the prebuilt one or a compiled ``llama-server``) for
    ``model`` with ``slots`` parallel slots, or ``local.server_command`` with {python},
    {host}, {port}, {model}, {alias}, {slots} and {n_ctx} (context per slot) filled in."""
    if settings.server_command is None:
        return llama.argv(program, model=path, alias=model.alias, port=port, host=HOST,
                          slots=slots, n_ctx=settings.n_ctx, threads=settings.n_threads,
                          chat_format=model.chat_format, template_file=_template_file(),
                          path=cpu_path, threads_batch=settings.n_threads_batch)
    values = {"{python}": sys.executable, "{host}": HOST, "{port}": str(port),
              "{model}": str(path), "{alias}": model.alias, "{slots}": str(slots),
              "{n_ctx}": str(settings.n_ctx)}
    argv = []
    for arg in settings.server_command:
        for key, value in values.items():
            arg = arg.replace(key, value)
        argv.append(arg)
    return argv


def _template_file() -> Path:
    template = st.local_dir() / "orch-plain.jinja"
    if not template.is_file() or template.read_text(encoding="utf-8") != llama.PLAIN_TEMPLATE:
        template.write_text(llama.PLAIN_TEMPLATE, encoding="utf-8")
    return template


def recorded_path() -> tuple[str, str | None]:
    """The CPU path later starts take: ``portable`` once a start died of SIGILL."""
    doc = st.read_state(st.path_file()) or {}
    if doc.get("path") == llama.PORTABLE:
        return llama.PORTABLE, doc.get("reason")
    return llama.FAST, None


def _spawn(settings: LocalSettings, model: LocalModel, path: Path, port: int, slots: int,
           choice: Choice | None) -> int:
    """Launch the supervisor in its own session (a Ctrl-C in this terminal must not stop a
    server other invocations share), with no secrets in its environment."""
    directory = st.local_dir()
    directory.mkdir(parents=True, exist_ok=True)
    cpu_path, reason = recorded_path()
    launch = directory / "launch.json"
    launch.write_text(json.dumps({
        "argv": server_argv(settings, model, path, port, slots,
                            choice and choice.fast, llama.FAST),
        "portable_argv": server_argv(settings, model, path, port, slots,
                                     choice and choice.portable, llama.PORTABLE),
        "server": choice.label if choice else "local.server_command",
        "portable_server": choice.portable_label if choice else "local.server_command",
        "portable_env": llama.PORTABLE_ENV, "path": cpu_path, "path_reason": reason,
        "path_file": str(st.path_file()), "warmup_model": model.alias,
        "start_timeout_s": settings.start_timeout_s, "slots": slots,
        "threads": settings.n_threads, "threads_batch": settings.n_threads_batch
        or settings.n_threads, "threads_reason": settings.threads_reason,
        "n_ctx_per_slot": settings.n_ctx, "host": HOST, "port": port,
        "models": [model.alias], "idle_s": settings.idle_s, "max_restarts": MAX_RESTARTS,
        "window_s": WINDOW_S, "state": str(st.state_path()), "lock": str(st.lock_path()),
        "last_used": str(st.last_used_path()), "log": str(st.log_path()),
    }, indent=2))
    log = st.log_path()
    if log.exists() and log.stat().st_size > 4 << 20:
        log.unlink()
    sent = set(secret_values())  # registered keys, whatever their variables are called
    env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k) and v not in sent}
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", st.SUPERVISOR_MODULE, str(launch)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=env)
    return proc.pid


def _undo_start(pid: int) -> None:
    """Stop the supervisor this call launched, and its server, before anyone relies on it."""
    if st.is_supervisor(pid):
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, 15.0):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
    state = st.read_state()
    if state is not None and state.get("pid") == pid:
        _kill_orphan(state)
        st.clear_state(pid)


def _wait_ready(pid: int, timeout_s: float,
                abandoned: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Wait until supervisor ``pid`` reports its server running and it answers (a server that
    just crashed is being restarted: wait for that too), or say why it will not."""
    deadline = time.monotonic() + timeout_s
    while True:
        if abandoned():
            raise st.Abandoned
        state = st.read_state()
        mine = state if state is not None and state.get("pid") == pid else None
        if mine is not None and mine.get("status") == st.RUNNING:
            health, served = st.probe(mine["host"], mine["port"])
            if health != "down":
                return {**mine, "served": served if served is not None else mine["models"]}
        if mine is not None and mine.get("status") == st.FAILED:
            _wait_gone(pid, 5)
            if not mine.get("ready_once"):
                st.clear_state(pid)  # a failed start is retried by the next use
            if IN_USE in (mine.get("error") or "").lower():
                raise _PortTaken
            raise OrchError(mine["error"])
        if mine is None and not st.pid_alive(pid):
            raise OrchError(f"the local server's supervisor exited during start-up: "
                            f"{st.log_tail() or 'no output'}; see {st.log_path()}")
        if time.monotonic() > deadline:
            if st.pid_alive(pid):
                os.kill(pid, signal.SIGTERM)
            raise OrchError(f"the local server did not answer within {timeout_s:g} s; see "
                            f"{st.log_path()} (or raise `local.start_timeout_s`)")
        time.sleep(0.05)


def _check_served(state: dict[str, Any], need: Collection[str]) -> None:
    missing = sorted(set(need) - set(state["models"]))  # what orch started it with
    if missing:
        raise OrchError(f"the running local server serves local/{state['models'][0]}, not "
                        f"local/{missing[0]} (one model per server); run `orch local stop` "
                        "when its waves are done: the next use starts it with this model")


def _clear_stale(state: dict[str, Any], retry_failed: bool) -> None:
    """A state file whose supervisor is gone: a crash loop stays an error for its window
    (unless the user retries on purpose); anything else is cleaned up and started afresh."""
    failed_at = state.get("failed_at") or 0
    if (state.get("status") == st.FAILED and not retry_failed
            and time.time() - failed_at < WINDOW_S):
        raise OrchError(state.get("error") or "the local server failed; run `orch local start`")
    _kill_orphan(state)
    st.clear_state()


def _kill_orphan(state: dict[str, Any]) -> None:
    """A server whose supervisor died without taking it along (no PDEATHSIG off Linux)."""
    pid = state.get("server_pid")
    if pid and st.pid_alive(pid) and st.cmdline(pid) == state.get("argv"):
        os.kill(pid, signal.SIGTERM)
        _wait_gone(pid, 10)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while st.pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
