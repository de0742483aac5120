"""One log renderer for standard-library and structlog records: one human line each
(``orch: warning: ...``) on a terminal or not, JSON lines only with --log-json; tracebacks at
debug; on a terminal the live table is never cut by a log line."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

SNIPPET = """
import logging
from orchestrator import runtime
runtime.configure_logging()
logging.getLogger("httpx").warning("from the standard library %s", "here")
runtime.log().warning("from_structlog", leg_id="w-1")
try:
    1 / 0
except ZeroDivisionError:
    runtime.log().debug("internal_error", exc_info=True)
"""


def run(env_extra: dict[str, str], *, tty: bool = False) -> str:
    env = dict(os.environ, **env_extra)
    if not tty:
        return subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                              text=True, timeout=60).stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", SNIPPET], env=env, stderr=follower,
                            stdout=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_off_a_terminal_both_kinds_of_record_are_human_lines_like_orchs_own():
    """A pipe or a CI log gets the lines a terminal gets: never JSON mixed with `orch:`."""
    assert run({"LOG_LEVEL": "warning"}).splitlines() == [
        "orch: warning: from the standard library here", "orch: warning: from_structlog leg_id=w-1"]


def test_json_lines_only_when_asked():
    lines = [json.loads(x) for x in run({"LOG_LEVEL": "warning", "ORCH_LOG_JSON": "1"})
             .splitlines()]
    assert [x["event"] for x in lines] == ["from the standard library here", "from_structlog"]
    assert all(x["level"] == "warning" and "timestamp" in x for x in lines)
    assert lines[0]["logger"] == "httpx" and lines[1]["leg_id"] == "w-1"


def test_debug_prints_the_traceback_not_exc_info_true():
    human = run({"LOG_LEVEL": "debug"})
    assert "orch: debug: internal_error\nTraceback (most recent call last)" in human
    lines = [json.loads(x) for x in run({"LOG_LEVEL": "debug", "ORCH_LOG_JSON": "1"})
             .splitlines() if x.startswith("{")]
    error = next(x for x in lines if x["event"] == "internal_error")
    assert "exc_info" not in error
    assert error["exception"].startswith("Traceback (most recent call last)")
    assert "ZeroDivisionError: division by zero" in error["exception"]


@pytest.mark.parametrize("json_flag", [False, True])
def test_a_terminal_gets_one_human_line_each_unless_log_json(json_flag):
    out = run({"LOG_LEVEL": "warning", **({"ORCH_LOG_JSON": "1"} if json_flag else {})},
              tty=True)
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 2
    if json_flag:
        assert all(json.loads(x)["level"] == "warning" for x in lines)
    else:
        assert not any(x.startswith("{") for x in lines)
        assert lines == ["orch: warning: from the standard library here",
                         "orch: warning: from_structlog leg_id=w-1"]


def test_log_json_is_a_global_option(orch, scripted_server, orch_home):
    orch.provider()
    env = dict(os.environ, ORCH_HOME=str(orch_home), LOG_LEVEL="debug")
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--log-json", "fanout",
                           "-m", "scripted/m", "-p", "x", "-q"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in proc.stderr.splitlines()]  # every line is JSON
    assert records and {"event", "level", "timestamp"} <= set(records[0])


LIVE = """
import threading, time
from orchestrator import runtime
from orchestrator.progress import LiveProgress
runtime.configure_logging()
with LiveProgress():
    time.sleep(0.5)
    runtime.log().warning("from_the_wave", leg_id="w-1")
    worker = threading.Thread(target=lambda: runtime.log().warning("from_a_thread"))
    worker.start()
    worker.join()
    time.sleep(0.5)
"""


def test_the_live_table_is_never_cut_by_a_log_line():
    """Log lines, from the wave or another thread, print whole above the table."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", LIVE], stderr=follower,
                            stdout=subprocess.DEVNULL, env=dict(os.environ, LOG_LEVEL="warning"))
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    out = b"".join(chunks).decode()
    for line in ("orch: warning: from_the_wave leg_id=w-1", "orch: warning: from_a_thread"):
        assert out.count(line) == 1, out
        before = out[:out.index(line)]
        assert before.count("┏") == before.count("└"), "the line landed inside a table"
