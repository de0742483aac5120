"""A real LiteLLM proxy for tests and benchmarks: a subprocess on 127.0.0.1, offline.

It runs ``litellm --config CONFIG`` (the proxy ships inside litellm; the rest of what it
imports is orch's ``gateway`` extra) on a free port, with no database, litellm's offline
switches and no feedback banner. It starts slowly (~10 s idle, far more on a busy machine), so
tests share one per session (tests/test_gateway.py)."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from orchestrator.testing.kit import OFFLINE_ENV

# What the proxy imports at start that litellm alone does not bring (pyproject `gateway`).
PROXY_MODULES = ("fastapi", "uvicorn", "mcp", "apscheduler", "backoff", "orjson", "jwt",
                 "semver", "expression", "soundfile", "websockets", "redis", "fastapi_sso",
                 "litellm_enterprise", "yaml", "multipart", "cryptography")


def missing_modules() -> list[str]:
    """The proxy's imports this environment lacks (empty: the proxy can start)."""
    return [name for name in PROXY_MODULES if importlib.util.find_spec(name) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiteLLMProxy:
    """``with LiteLLMProxy(config, env=...) as proxy: proxy.url`` — the proxy's /v1 base."""

    def __init__(self, config: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None, start_timeout: float = 240.0):
        self.config = Path(config)
        self.cwd = Path(cwd or self.config.parent)
        self.port = free_port()
        self.start_timeout = start_timeout
        self.log_path = self.cwd / f"litellm-proxy-{self.port}.log"
        self.env = {**os.environ, **OFFLINE_ENV, "LITELLM_DONT_SHOW_FEEDBACK_BOX": "true",
                    **(env or {})}
        self.env.pop("DATABASE_URL", None)  # no database: keys and spend live in memory
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        script = Path(sys.executable).parent / "litellm"
        launcher = [str(script)] if script.exists() else [
            sys.executable, "-c", "from litellm_cli.main import proxy_server; proxy_server()"]
        return [*launcher, "--config", str(self.config), "--host", "127.0.0.1",
                "--port", str(self.port), "--num_workers", "1"]

    def start(self) -> LiteLLMProxy:
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child writes it until stop()
        self._proc = subprocess.Popen(self.command(), cwd=self.cwd, env=self.env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the LiteLLM proxy exited ({self._proc.returncode}):\n"
                                   f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health/liveliness",
                                            timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the LiteLLM proxy did not answer within {self.start_timeout:g} s"
                           f":\n{self.log_tail()}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the proxy and its workers
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LiteLLMProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
