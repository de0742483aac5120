"""The small process that owns the local server: ``python -m orchestrator.local.supervisor
LAUNCH.json``.

It starts the server and marks it ``running`` only once ``/v1/models`` answers *and* one real
1-token completion comes back (a server that loads but cannot generate is not ready). A crash
at that point is diagnosed in one line (:func:`diagnose`); on SIGILL it restarts once on the
portable path and records that (state ``path``, and ``path.json`` so later starts go straight
there). It restarts the server when it crashes (at most ``max_restarts`` times in ``window_s``, then ``failed`` with the reason), and
stops it once no orch process has touched ``last-used`` for ``idle_s``. It outlives the orch
invocation that started it (its own session), and the server dies with it (Linux: PDEATHSIG).
It is the only writer of the state file, and removes it when it stops.
"""

from __future__ import annotations

import ctypes
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.local import state as st
from orchestrator.local.llama_server import FAST, PORTABLE
from orchestrator.store import write_json_atomic

POLL_S = 0.1


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the supervisor dies, even by SIGKILL."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Supervisor:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.argv: list[str] = spec["argv"]
        self.portable_argv: list[str] = spec.get("portable_argv") or spec["argv"]
        self.portable_env: dict[str, str] = spec.get("portable_env") or {}
        self.path: str = spec.get("path") or FAST
        self.servers = {FAST: spec.get("server"),
                        PORTABLE: spec.get("portable_server") or spec.get("server")}
        self.path_file = Path(spec["path_file"]) if spec.get("path_file") else None
        self.warmup_model: str | None = spec.get("warmup_model")
        self.start_timeout_s: float = spec.get("start_timeout_s", 120.0)
        self.host: str = spec["host"]
        self.port: int = spec["port"]
        self.idle_s: float = spec["idle_s"]
        self.max_restarts: int = spec.get("max_restarts", 3)
        self.window_s: float = spec.get("window_s", 300.0)
        self.backoff_s: float = spec.get("backoff_s", 0.5)
        self.failed = False
        self.state_file = Path(spec["state"])
        self.lock_file = Path(spec["lock"])
        self.last_used_file = Path(spec["last_used"])
        self.log_file = spec["log"]
        self.child: subprocess.Popen | None = None
        self.stopping = False
        self.began = time.time()
        self.ever_ready = False
        self.state: dict[str, Any] = {
            "pid": os.getpid(), "server_pid": None, "host": self.host, "port": self.port,
            "url": f"http://{self.host}:{self.port}/v1", "models": spec["models"],
            "started_at": _now_iso(), "status": st.STARTING, "restarts": 0,
            "recent_restarts": [], "error": None, "failed_at": None, "idle_s": self.idle_s,
            "ready_once": False, "log": self.log_file, "argv": self._argv(),
            "path": self.path, "path_reason": spec.get("path_reason"),
            "slots": spec.get("slots"), "n_ctx_per_slot": spec.get("n_ctx_per_slot"),
            "threads": spec.get("threads"), "threads_batch": spec.get("threads_batch"),
            "threads_reason": spec.get("threads_reason"),
            "server": self.servers[self.path],
        }

    def say(self, text: str) -> None:
        print(f"[orch supervisor {_now_iso()}] {text}", flush=True)

    def save(self) -> None:
        st.write_state(self.state, self.state_file)

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self._spawn()
        while not self.stopping:
            code = self.child.poll()
            if code is not None and not self.stopping:
                if not self._after_exit(code):
                    return 1
                continue
            if self.state["status"] != st.RUNNING and st.probe(self.host, self.port, 1.0)[0] == "ok":
                if not self._warm_up():
                    continue  # it died generating, or the generation failed: handled above
                self.ever_ready = True
                self.state.update(status=st.RUNNING, ready_once=True)
                self.save()
                self.say(f"server pid {self.child.pid} ready on port {self.port} "
                         f"({self.path} path; a 1-token completion came back)")
            if self._idle():
                break
            time.sleep(POLL_S)
        if self.failed:
            return 1
        self._stop_child()
        st.clear_state(self.state["pid"], self.state_file)
        self.say("stopped")
        return 0

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    def _argv(self) -> list[str]:
        return self.portable_argv if self.path == PORTABLE else self.argv

    def _spawn(self) -> None:
        env = {**os.environ, **self.portable_env} if self.path == PORTABLE else None
        argv = self._argv()
        self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env,
                                      preexec_fn=_die_with_parent)
        self.state.update(server_pid=self.child.pid, status=st.STARTING, argv=argv,
                          server=self.servers[self.path])
        self.save()
        self.say(f"started server pid {self.child.pid} ({self.path} path): {' '.join(argv)}")

    def _warm_up(self) -> bool:
        """One real 1-token completion before ``ready``. False when it failed: a dead server
        is then handled as an exit (the next poll), a live one that cannot generate fails."""
        if not self.warmup_model:
            return True
        body = json.dumps({"model": self.warmup_model, "max_tokens": 1, "temperature": 0,
                           "messages": [{"role": "user", "content": "Hello"}]}).encode()
        req = urllib.request.Request(f"{self.state['url']}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with st.NO_PROXY.open(req, timeout=self.start_timeout_s) as resp:
                resp.read()
            return True
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            try:
                self.child.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            if self.child.poll() is not None:
                return False
            detail = (f"HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:200]}"
                      if isinstance(exc, urllib.error.HTTPError) else str(exc))
            self._stop_child()
            self._fail(f"the local server loaded but could not generate one token ({detail}); "
                       f"see {self.log_file}", time.time())
            self.stopping = True
            self.failed = True
            return False

    def _after_exit(self, code: int) -> bool:
        """The server exited on its own: restart it, or give up (False) with the reason."""
        now = time.time()
        recent = [t for t in self.state["recent_restarts"] if now - t < self.window_s]
        tail = st.log_tail(Path(self.log_file))
        if not self.ever_ready:
            if code == -signal.SIGILL and self.path != PORTABLE:
                return self._go_portable(code)
            return self._fail(f"the local server {diagnose(code, self.path)} before it was "
                              f"ready: {tail or 'no output'}; see {self.log_file}", now)
        if len(recent) >= self.max_restarts:
            return self._fail(
                f"the local server crashed {len(recent) + 1} times within "
                f"{self.window_s / 60:g} minutes (last: {diagnose(code, self.path)}): "
                f"{tail or 'no output'}; see {self.log_file}, fix it, then `orch local start`",
                now)
        recent.append(now)
        self.state.update(recent_restarts=recent, restarts=self.state["restarts"] + 1,
                          status=st.RESTARTING)
        self.save()
        self.say(f"server {diagnose(code, self.path)}: restart {len(recent)} of "
                 f"{self.max_restarts} in {self.window_s / 60:g} minutes")
        deadline = time.monotonic() + self.backoff_s
        while time.monotonic() < deadline and not self.stopping:
            time.sleep(POLL_S)
        if not self.stopping:
            self._spawn()
        return True

    def _go_portable(self, code: int) -> bool:
        """SIGILL at start-up: once, again on the portable path, remembered for later starts."""
        reason = (f"{_now_iso()}: {diagnose(code, self.path)} on its first completion; "
                  "restarted on the portable path")
        self.say(reason)
        self.path = PORTABLE
        self.state.update(path=PORTABLE, path_reason=reason)
        if self.path_file is not None:
            write_json_atomic(self.path_file, {"path": PORTABLE, "reason": reason})
        self._spawn()
        return True

    def _fail(self, error: str, now: float) -> bool:
        self.state.update(status=st.FAILED, error=error, failed_at=now, server_pid=None)
        self.save()
        self.say(error)
        return False

    def _idle(self) -> bool:
        """No orch process used the server for ``idle_s``: stop, unless one holds the lock
        right now (it is checking or starting the server and will touch last-used)."""
        if self.idle_s <= 0:
            return False
        used = st.last_used(self.last_used_file) or 0.0
        idle = time.time() - max(used, self.began)
        if idle < self.idle_s:
            return False
        with st.try_server_lock(self.lock_file) as locked:
            if not locked:
                return False
            used = st.last_used(self.last_used_file) or 0.0
            if time.time() - max(used, self.began) < self.idle_s:
                return False
            self.say(f"idle for {idle:.0f} s (limit {self.idle_s:g} s): stopping")
            self._stop_child()
            st.clear_state(self.state["pid"], self.state_file)
        self.stopping = True
        return True

    def _stop_child(self) -> None:
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5)


_CAUSES = {
    signal.SIGILL: ("died with SIGILL (illegal instruction)",
                    "its CPU code uses an instruction this CPU advertises but does not run "
                    "(AMX or AVX-512 on some VMs)"),
    signal.SIGSEGV: ("died with SIGSEGV (segmentation fault)",
                     "a crash inside llama.cpp, often a model file it cannot read"),
    signal.SIGBUS: ("died with SIGBUS (bus error)",
                    "the model file changed or shrank while it was mapped"),
    signal.SIGKILL: ("was killed (SIGKILL)",
                     "most likely the kernel's out-of-memory killer"),
    signal.SIGABRT: ("aborted (SIGABRT)", "llama.cpp stopped on an internal check"),
}
_REMEDIES = {
    signal.SIGILL: {FAST: "orch retries once on the portable path (repacking off)",
                    PORTABLE: "even the portable path faults, so this CPU lacks the build's "
                              "baseline (AVX2, FMA, F16C): run orch on a newer x86-64 CPU"},
    signal.SIGSEGV: "check the model file (`orch local list`) and see the log",
    signal.SIGBUS: "do not replace model files while the server runs; `orch local start`",
    signal.SIGKILL: "free memory, or lower `local.max_slots` / `local.n_ctx`",
    signal.SIGABRT: "the log's last lines name the check",
}


def diagnose(code: int, path: str = FAST) -> str:
    """One line: what happened (signal or exit code), the likely cause, the remedy."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"died with signal {-code}"
    what, cause = _CAUSES.get(sig, (f"died with {sig.name}", "an unexpected signal"))
    remedy = _REMEDIES.get(sig, "see the log")
    remedy = remedy.get(path, "") if isinstance(remedy, dict) else remedy
    return f"{what}: likely cause: {cause}; remedy: {remedy}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m orchestrator.local.supervisor LAUNCH.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    return Supervisor(spec).run()


if __name__ == "__main__":
    sys.exit(main())
