"""One log renderer for standard-library and structlog records: JSON lines when stderr is not
a terminal (or with --log-json), one human line each on a terminal; tracebacks at debug."""

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


def test_both_kinds_of_record_are_json_lines_when_stderr_is_not_a_terminal():
    lines = [json.loads(x) for x in run({"LOG_LEVEL": "warning"}).splitlines()]
    assert [x["event"] for x in lines] == ["from the standard library here", "from_structlog"]
    assert all(x["level"] == "warning" and "timestamp" in x for x in lines)
    assert lines[0]["logger"] == "httpx" and lines[1]["leg_id"] == "w-1"


def test_debug_prints_the_traceback_not_exc_info_true():
    lines = [json.loads(x) for x in run({"LOG_LEVEL": "debug"}).splitlines()
             if x.startswith("{")]
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
        assert "from the standard library here" in lines[0] and "warning" in lines[0]
        assert "from_structlog" in lines[1] and "leg_id=w-1" in lines[1]


def test_log_json_is_a_global_option(orch, scripted_server, orch_home):
    orch.provider()
    env = dict(os.environ, ORCH_HOME=str(orch_home), LOG_LEVEL="debug")
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--log-json", "fanout",
                           "-m", "scripted/m", "-p", "x", "-q"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(x) for x in proc.stderr.splitlines()]  # every line is JSON
    assert records and {"event", "level", "timestamp"} <= set(records[0])
