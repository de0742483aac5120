"""Drive a real headless Chromium over the DevTools protocol for the ``orch ui`` tests: open a
URL, read the DOM after scripts ran, evaluate JavaScript in the page, take a screenshot. Also
starts the real ``orch ui`` command as a child process. Skips without Chromium."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "headless_shell")


def browser_path() -> str:
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.skip("Chromium is not installed (apt-get install chromium): no browser test")
    return found


class OrchUI:
    """``orch ui --no-open`` as a child process: its URL, port and token."""

    def __init__(self, *args: str) -> None:
        orch = Path(sys.executable).with_name("orch")
        self.proc = subprocess.Popen([str(orch), "ui", "--no-open", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
        if not match:
            self.proc.kill()
            raise AssertionError(f"orch ui printed {line!r}; stderr: {self.proc.stderr.read()}")
        self.url, self.port, self.token = line, int(match[1]), match[2]
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Chromium:
    """One headless Chromium with one page, spoken to over the DevTools websocket."""

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        self.proc = subprocess.Popen(
            [browser_path(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--hide-scrollbars", "--window-size=1280,1400", f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        port = None
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                port = int(m[1])
            elif not line and self.proc.poll() is not None:
                break
        if port is None:
            self.proc.kill()
            pytest.fail("Chromium did not start its DevTools endpoint")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            target = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=20)
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=30))
            if msg.get("id") == n:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        time.sleep(0.2)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise AssertionError(f"not true after {timeout}s: {expression}")
            time.sleep(0.1)

    def screenshot(self, out: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        out.write_bytes(base64.b64decode(data["data"]))
        return keep(out)

    def close(self) -> None:
        try:  # a browser asked to close cleans up its scratch folders; a killed one leaves them
            n = next(self.ids)
            self.ws.send(json.dumps({"id": n, "method": "Browser.close", "params": {}}))
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - then it is terminated below
            pass
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def keep(shot: Path) -> Path:
    """A screenshot kept as a CI artifact: copied into ``$ORCH_TEST_ARTIFACTS/ui/`` when that
    is set (``.ci/run`` sets it), else left in the test's tmp folder only."""
    folder = os.environ.get("ORCH_TEST_ARTIFACTS")
    if folder:
        (Path(folder) / "ui").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(folder) / "ui" / shot.name)
    return shot
