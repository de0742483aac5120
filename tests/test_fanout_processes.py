"""`orch fanout` as separate OS processes: signals, concurrent ledger writers, secrets."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, ORCH_HOME=str(home), LOG_LEVEL="info")
    env.update(extra)
    env.pop("ORCH_RUNS_DIR", None)
    return env


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_marks_running_legs_aborted_and_exits_128_plus_n(
        orch, scripted_server, orch_home, signum, code):
    orch.provider()
    scripted_server.script("quick", Reply(text="done early"))
    scripted_server.script("slow", Reply(text="never", latency=60))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/quick,scripted/slow", "-p", "x",
                             "--json"], env=env_for(orch_home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while scripted_server.count("slow") == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scripted_server.count("slow") == 1
    time.sleep(0.3)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    doc = json.loads(out)
    assert doc["status"] == "partial" and doc["exit_code"] == code
    statuses = {leg["model"]: leg["status"] for leg in doc["legs"]}
    assert statuses == {"scripted/quick": "complete", "scripted/slow": "aborted"}
    wave = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert wave["legs"][1]["status"] == "aborted"
    con = sqlite3.connect(orch_home / "ledger.db")
    rows = con.execute("select model, status from spend order by model").fetchall()
    assert rows == [("scripted/quick", "complete"), ("scripted/slow", "aborted")]


def test_four_concurrent_fanouts_lose_no_ledger_row(orch, scripted_server, orch_home):
    """Four `orch fanout` processes at once, each forked warm (orchestrator/testing/warm.py):
    the ledger's concurrent writers are the promise, not four cold imports."""
    from orchestrator.testing import warm

    orch.provider()
    scripted_server.script("m", Reply(text="ok", latency=0.2))
    procs = [warm.start(["fanout", "-m", ",".join(["scripted/m"] * 5), "-p", "x", "-q",
                         "--tag", f"p{i}"], env=env_for(orch_home)) for i in range(4)]
    for p in procs:
        done = p.wait(timeout=120)
        assert done.returncode == 0, done.stderr
    con = sqlite3.connect(orch_home / "ledger.db")
    counts = dict(con.execute("select tag, count(*) from spend group by tag").fetchall())
    assert counts == {"p0": 5, "p1": 5, "p2": 5, "p3": 5}


def test_an_api_key_never_appears_in_output_logs_artifacts_or_ledger(
        orch, scripted_server, orch_home, ledger_url, request):
    """On SQLite (its file and WAL under ORCH_HOME) and on PostgreSQL (every file of the
    server's data directory, WAL included, after a checkpoint)."""
    secret = "sk-test-TOPSECRET-0123456789abcdef"
    orch.provider(api_key_env="SCRIPTED_API_KEY")
    scripted_server.script("ok", Reply(text="fine"))
    scripted_server.script("denied", Reply(status=401, error_message=f"Incorrect API key "
                                                                     f"provided: {secret}"))
    proc = subprocess.run([*ORCH, "fanout", "-m", "scripted/ok,scripted/denied", "-p", "x",
                           "--json"], env=env_for(orch_home, SCRIPTED_API_KEY=secret,
                                                  OPENAI_API_KEY=secret, LOG_LEVEL="debug"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    # the key did travel on the wire, where it belongs
    assert scripted_server.requests_for("ok")[0].headers["authorization"] == f"Bearer {secret}"
    doc = json.loads(proc.stdout)
    assert doc["legs"][1]["reason"].startswith("auth:")
    assert secret not in proc.stdout and secret not in proc.stderr
    from orchestrator.ledger.spend import Ledger

    rows = {r["model"]: r for r in Ledger().rows()}
    assert rows["scripted/ok"]["status"] == "complete"
    assert rows["scripted/denied"]["reason"].startswith("auth:")  # the row that quoted the key
    assert secret not in json.dumps(list(rows.values()), default=str)
    stores = [orch_home]
    if ledger_url.startswith("postgresql"):
        import psycopg

        cluster = request.getfixturevalue("pg_cluster")
        with psycopg.connect(host="127.0.0.1", port=cluster.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        stores.append(cluster.data)
    for store in stores:
        seen = False  # the scan reads where the rows are: their wave id is there
        for path in store.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert secret.encode() not in data, path
                seen = seen or doc["wave_id"].encode() in data
        assert seen, store
