"""One deadline for the ledger, from opening it to every row's commit, shared by every row of
a wave (docs/spend.md: 30 s in total, then the outbox), and a signal acted on within 2 s
whatever the ledger is doing.

The real `orch fanout` in a subprocess against the scripted server; the ledger stalled two
ways: another process holding ``BEGIN EXCLUSIVE`` on a SQLite ledger, and a PostgreSQL
server frozen with SIGSTOP while orch's connection to it is open (a throwaway cluster of the
test's own, so no other test's database freezes). ``ORCH_LEDGER_DEADLINE_S`` makes the
deadline short where the test waits it out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
LEGS = 4
DEADLINE = 2.0


def wait_for(check, timeout: float = 60.0, what: str = "") -> None:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def stepping(gate: threading.Event | None = None):
    """Each leg: a tool call, then its answer (two billed answers, three ledger writes);
    ``gate``: the very first answer waits for it (the test stalls the ledger meanwhile)."""
    first = threading.Lock()
    state = {"gated": False}

    def reply(body, n):
        if gate is not None:
            with first:
                mine, state["gated"] = not state["gated"], True
            if mine:
                gate.wait(60)
        if not any(m["role"] == "tool" for m in body["messages"]):
            return Reply(tool_calls=[{"name": "list", "arguments": {}}],
                         usage={"prompt_tokens": 100, "completion_tokens": 10})
        return Reply(text="done", usage={"prompt_tokens": 120, "completion_tokens": 5})
    return reply


def fanout(tmp_path: Path, env: dict, *extra: str) -> subprocess.Popen:
    models = ",".join(f"scripted/m{n}" for n in range(LEGS))
    return subprocess.Popen([*ORCH, "fanout", "-m", models, "-p", "List the folder.",
                             "--workspace", str(tmp_path), "--json", "-q", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=env)


def hold_exclusive(db: Path) -> subprocess.Popen:
    """Another process with ``BEGIN EXCLUSIVE`` on ``db`` until its stdin closes."""
    code = ("import sqlite3, sys\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    holder.wait(timeout=30)


def replayed_rows(scripted_server) -> None:
    """`orch spend` replays the outbox: one row per leg, holding both its answers."""
    spent = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert spent.exit_code == 0, spent.output
    assert f"replayed {LEGS} rows from the ledger outbox" in spent.stderr
    from orchestrator.ledger.spend import Ledger

    rows = Ledger().rows()
    assert len(rows) == LEGS and {r["seq"] for r in rows} == {2}
    assert {r["status"] for r in rows} == {"complete"}
    assert sum(r["input_tokens"] for r in rows) == LEGS * 220
    assert len([r for r in scripted_server.chats if r.status == 200]) == 2 * LEGS


def test_a_sqlite_ledger_held_exclusive_costs_the_wave_one_deadline_from_open_to_commit(
        orch, scripted_server, orch_home, tmp_path):
    """A fresh ledger file another process holds with BEGIN EXCLUSIVE: before, opening it
    was outside the deadline and each row waited its own 30 s (4 legs × 3 writes)."""
    orch.provider()
    for n in range(LEGS):
        scripted_server.script(f"m{n}", stepping())
    holder = hold_exclusive(orch_home / "ledger.db")
    env = dict(os.environ, ORCH_HOME=str(orch_home), ORCH_LEDGER_DEADLINE_S=str(DEADLINE))
    proc = fanout(tmp_path, env)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        ended = time.monotonic()
        release(holder)
    wall = ended - scripted_server.chats[0].t_start  # from the first request to the exit
    doc = json.loads(out)
    assert proc.returncode == 0, err
    assert doc["status"] == "complete" and doc["ledger_errors"] == []
    assert all("ledger_outbox" in leg for leg in doc["legs"])
    assert "could not be written in time and wait in the outbox" in " ".join(doc["notices"])
    # one deadline for the wave (the pre-flight's open spent it), not one per row: before,
    # each of the 12 rows waited its own 30 s
    assert wall < DEADLINE + 10, wall
    replayed_rows(scripted_server)


def test_opening_the_ledger_is_under_the_deadline(orch_home):
    """The pre-flight's open of a ledger another process holds exclusive waited SQLite's own
    30 s busy timeout, outside any deadline: now it is the wave's deadline's first use."""
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.ledger import migrate, spend  # noqa: F401 - imported before the clock

    holder = hold_exclusive(orch_home / "ledger.db")
    try:
        sink = LedgerSink(budget_s=1.0)
        started = time.monotonic()
        sink.preflight()
        took = time.monotonic() - started
    finally:
        release(holder)
    assert took < 1.0 + 1.5, took
    assert sink.left() == 0.0  # spent: the wave's rows go straight to the outbox


def test_sigterm_is_acted_on_within_2_s_while_a_row_waits_on_a_locked_sqlite_ledger(
        orch, scripted_server, orch_home, tmp_path):
    """The default 30 s deadline, a row waiting on it: SIGTERM ends the process within 2 s
    and the rows are journaled, not lost."""
    from orchestrator.ledger.spend import Ledger

    orch.provider()
    for n in range(LEGS):
        scripted_server.script(f"m{n}", stepping())
    Ledger().close()  # an orch ledger (WAL): the holder blocks writers, not readers
    holder = hold_exclusive(orch_home / "ledger.db")
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    env.pop("ORCH_LEDGER_DEADLINE_S", None)
    proc = fanout(tmp_path, env)
    try:
        wait_for(lambda: len([r for r in scripted_server.chats if r.status == 200]) >= LEGS,
                 what="the first answers (their rows now wait on the ledger)")
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        release(holder)
    assert proc.returncode == 143, err
    assert took < 2.0, took
    doc = json.loads(out)
    assert doc["ledger_errors"] == [] and doc["signal"] == signal.SIGTERM
    spent = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert json.loads(spent.stdout)["legs"] == LEGS  # every billed leg, from the outbox


# -- PostgreSQL frozen with its connection open ------------------------------------------------

@pytest.fixture
def frozen_pg():
    """A throwaway cluster and a switch that stops (SIGSTOP) and resumes every process of
    it: the server keeps its sockets open and answers nothing, a network partition's
    symptom. Only this cluster's own processes are signalled."""
    from orchestrator.testing import postgres

    why = postgres.unavailable()
    if why:
        pytest.skip(f"PostgreSQL: {why}")
    cluster = postgres.Cluster()
    stopped: list[int] = []

    def processes() -> list[int]:
        main = int((cluster.data / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
        return [main, *(int(c) for c in children)]

    def freeze() -> None:
        for pid in processes():
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    def thaw() -> None:
        while stopped:
            try:
                os.kill(stopped.pop(), signal.SIGCONT)
            except ProcessLookupError:
                pass

    try:
        yield cluster, freeze, thaw
    finally:
        thaw()
        from orchestrator.ledger import connection

        connection.dispose_all()
        cluster.close()


def frozen_wave(orch, scripted_server, tmp_path, monkeypatch, frozen_pg, deadline: str | None):
    """A fanout whose first answer waits until the ledger's server is frozen (orch's pooled
    connection to it is open by then: the pre-flight opened it)."""
    from orchestrator.ledger.spend import Ledger

    cluster, freeze, thaw = frozen_pg
    url = cluster.new_database()
    monkeypatch.setenv("ORCH_LEDGER_URL", url)
    Ledger().close()
    orch.provider()
    gate = threading.Event()
    for n in range(LEGS):
        scripted_server.script(f"m{n}", stepping(gate))
    env = dict(os.environ, ORCH_HOME=str(orch.home))
    env.pop("ORCH_LEDGER_DEADLINE_S", None)
    if deadline is not None:
        env["ORCH_LEDGER_DEADLINE_S"] = deadline
    proc = fanout(tmp_path, env)
    wait_for(lambda: scripted_server.count() >= 1, what="the first request")
    freeze()
    gate.set()
    return proc, thaw


def test_a_frozen_postgres_costs_the_wave_one_deadline_then_the_outbox(
        orch, scripted_server, tmp_path, monkeypatch, frozen_pg):
    """Before, the wave hung until the server came back (9 min), writing no outbox."""
    proc, thaw = frozen_wave(orch, scripted_server, tmp_path, monkeypatch, frozen_pg,
                             str(DEADLINE))
    try:
        out, err = proc.communicate(timeout=120)
        wall = time.monotonic() - scripted_server.chats[0].t_start  # first request to exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        thaw()
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["ledger_errors"] == [] and all("ledger_outbox" in leg for leg in doc["legs"])
    assert wall < DEADLINE + 10, wall
    replayed_rows(scripted_server)


def test_sigterm_is_acted_on_within_2_s_while_postgres_is_frozen(
        orch, scripted_server, tmp_path, monkeypatch, frozen_pg):
    proc, thaw = frozen_wave(orch, scripted_server, tmp_path, monkeypatch, frozen_pg, None)
    try:
        wait_for(lambda: len([r for r in scripted_server.chats if r.status == 200]) >= LEGS,
                 what="the first answers (their rows now wait on the frozen server)")
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        thaw()
    assert proc.returncode == 143, err
    assert took < 2.0, took
    assert json.loads(out)["ledger_errors"] == []
    spent = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert json.loads(spent.stdout)["legs"] == LEGS
