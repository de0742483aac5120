"""The small process that owns the local server: ``python -m orchestrator.local.supervisor
LAUNCH.json``.

It starts the server, marks it ``running`` once ``/v1/models`` answers, restarts it when it
crashes (at most ``max_restarts`` times in ``window_s``, then ``failed`` with the reason), and
stops it once no orch process has touched ``last-used`` for ``idle_s``. It outlives the orch
invocation that started it (its own session), and the server dies with it (Linux: PDEATHSIG).
It is the only writer of the state file, and removes it when it stops.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.local import state as st

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
        self.host: str = spec["host"]
        self.port: int = spec["port"]
        self.idle_s: float = spec["idle_s"]
        self.max_restarts: int = spec.get("max_restarts", 3)
        self.window_s: float = spec.get("window_s", 300.0)
        self.backoff_s: float = spec.get("backoff_s", 0.5)
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
            "ready_once": False, "log": self.log_file, "argv": self.argv,
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
                self.ever_ready = True
                self.state.update(status=st.RUNNING, ready_once=True)
                self.save()
                self.say(f"server pid {self.child.pid} ready on port {self.port}")
            if self._idle():
                break
            time.sleep(POLL_S)
        self._stop_child()
        st.clear_state(self.state["pid"], self.state_file)
        self.say("stopped")
        return 0

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    def _spawn(self) -> None:
        self.child = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                      preexec_fn=_die_with_parent)
        self.state["server_pid"] = self.child.pid
        self.state["status"] = st.STARTING
        self.save()
        self.say(f"started server pid {self.child.pid}: {' '.join(self.argv)}")

    def _after_exit(self, code: int) -> bool:
        """The server exited on its own: restart it, or give up (False) with the reason."""
        now = time.time()
        recent = [t for t in self.state["recent_restarts"] if now - t < self.window_s]
        tail = st.log_tail(Path(self.log_file))
        if not self.ever_ready:
            return self._fail(f"the local server exited before it was ready (exit code {code})"
                              f": {tail or 'no output'}; see {self.log_file}", now)
        if len(recent) >= self.max_restarts:
            return self._fail(
                f"the local server crashed {len(recent) + 1} times within "
                f"{self.window_s / 60:g} minutes (last exit code {code}): "
                f"{tail or 'no output'}; see {self.log_file}, fix it, then `orch server start`",
                now)
        recent.append(now)
        self.state.update(recent_restarts=recent, restarts=self.state["restarts"] + 1,
                          status=st.RESTARTING)
        self.save()
        self.say(f"server exited with code {code}: restart {len(recent)} of "
                 f"{self.max_restarts} in {self.window_s / 60:g} minutes")
        deadline = time.monotonic() + self.backoff_s
        while time.monotonic() < deadline and not self.stopping:
            time.sleep(POLL_S)
        if not self.stopping:
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m orchestrator.local.supervisor LAUNCH.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    return Supervisor(spec).run()


if __name__ == "__main__":
    sys.exit(main())
