"""The spend ledger on real databases: rollups, honest unknown costs, and concurrent writers.

Every test that takes ``ledger`` (or ``ledger_url``) runs twice: on a SQLite file and on a
fresh database of a real PostgreSQL server (orchestrator.testing.postgres)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.errors import OrchError
from orchestrator.ledger.spend import GROUP_BY, Ledger, parse_since

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def home(orch_home):
    """The kit's ORCH_HOME (temporary, offline, no ORCH_LEDGER_URL)."""
    return orch_home


@pytest.fixture
def ledger(ledger_url):
    led = Ledger()
    yield led
    led.close()


def row(**overrides):
    base = {"ts": T0, "wave_id": "w1", "leg_id": "w1-a", "kind": "leg",
            "model": "openai/gpt-4o-mini", "provider": "openai", "status": "complete",
            "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01, "cost_source": "priced",
            "duration_s": 1.5}
    return {**base, **overrides}


@pytest.fixture
def filled(ledger):
    ledger.append_many([
        row(),
        row(leg_id="w1-b", model="myvllm/qwen3-8b", provider="myvllm", cost_usd=0.0,
            cost_source="free", reasoning_tokens=7, tag="bugs"),
        row(leg_id="w1-c", model="mystery/x", provider="mystery", cost_usd=None,
            cost_source="unknown", cached_tokens=50, tag="bugs"),
        row(ts=T0 + timedelta(days=1), wave_id="w2", leg_id="w2-a", status="error",
            reason="rate_limited: slow down", input_tokens=0, output_tokens=0, cost_usd=0.02),
        row(ts=T0 + timedelta(days=1), wave_id="w2", leg_id="w2-b", kind="chair",
            status="refused", input_tokens=0, output_tokens=0, cost_usd=None,
            cost_source="unknown", run_id="council-1"),
    ])
    return ledger


def test_default_location_is_orch_home(home):
    ledger = Ledger()
    assert (home / "ledger.db").exists()
    assert ledger.location.endswith("ledger.db")


def test_ledger_url_env_wins(tmp_path, home, monkeypatch):
    target = tmp_path / "team" / "shared.db"
    monkeypatch.setenv("ORCH_LEDGER_URL", f"sqlite:///{target}")
    Ledger().append(row())
    assert target.exists()
    assert not (home / "ledger.db").exists()


def test_wal_mode_is_on(home):
    ledger = Ledger()
    ledger.append(row())
    with sqlite3.connect(home / "ledger.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with ledger.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
        assert raw.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_the_switch_to_wal_waits_out_a_racing_first_open(tmp_path):
    """Racing first opens: SQLite can refuse the switch to WAL with "database is locked" at
    once, its busy handler never called (seen in CI: 1 in 15 rounds of 12 processes). The
    connect hook waits that out like any busy writer; other errors still raise."""
    from orchestrator.ledger import connection

    real = sqlite3.connect(tmp_path / "l.db")

    class Refusing:
        refusals = 2

        def __init__(self):
            self.cursor = real.cursor()

        def execute(self, sql):
            if "journal_mode" in sql and Refusing.refusals:
                Refusing.refusals -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.cursor.execute(sql)

    connection._to_wal(Refusing())
    assert Refusing.refusals == 0
    assert real.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    class Broken(Refusing):
        def execute(self, sql):
            raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        connection._to_wal(Broken())


def test_append_fills_defaults_and_reads_back_utc(ledger):
    ledger.append({"wave_id": "w", "leg_id": "w-a", "kind": "leg", "model": "a/b",
                   "provider": "a", "status": "aborted"})
    (got,) = ledger.rows()
    assert got["ts"].tzinfo is not None and got["ts"].utcoffset() == timedelta(0)
    assert abs(got["ts"] - datetime.now(UTC)) < timedelta(minutes=1)
    assert (got["input_tokens"], got["output_tokens"], got["cost_usd"], got["cost_source"]) == (
        0, 0, None, "unknown")


def test_append_rejects_caller_bugs(ledger):
    with pytest.raises(ValueError, match="unknown fields: api_key"):
        ledger.append(row(api_key="sk-nope"))
    with pytest.raises(ValueError, match="missing: status"):
        ledger.append({k: v for k, v in row().items() if k != "status"})
    assert ledger.rows() == []


def test_rows_filters(filled):
    assert [r["leg_id"] for r in filled.rows()] == ["w1-a", "w1-b", "w1-c", "w2-a", "w2-b"]
    assert [r["leg_id"] for r in filled.rows(wave_id="w2")] == ["w2-a", "w2-b"]
    assert [r["leg_id"] for r in filled.rows(run_id="council-1")] == ["w2-b"]
    assert [r["leg_id"] for r in filled.rows(since=T0 + timedelta(hours=1))] == ["w2-a", "w2-b"]


def test_rollup_totals_floor_and_failed_cost(filled):
    data = filled.rollup()
    assert data == {"legs": 5, "total_cost_usd": 0.03, "unknown_cost_legs": 2,
                    "failed_cost_usd": 0.02, "suspect_legs": 0, "suspect_cost_usd": 0.0,
                    "bounded_legs": 0, "bound_cost_usd": 0.03, "groups": []}


def test_since_is_inclusive_and_naive_means_utc(filled):
    assert filled.rollup(since=T0 + timedelta(days=1))["legs"] == 2
    assert filled.rollup(since=datetime(2025, 3, 2, 12, 0))["legs"] == 2
    assert filled.rollup(since=datetime(2025, 3, 2, 12, 0, 1))["legs"] == 0
    assert filled.rollup(since=T0 - timedelta(seconds=1))["legs"] == 5


def test_empty_ledger_rollup(ledger):
    assert ledger.rollup(group_by="model") == {"legs": 0, "total_cost_usd": 0.0,
                                               "unknown_cost_legs": 0, "failed_cost_usd": 0.0,
                                               "suspect_legs": 0, "suspect_cost_usd": 0.0,
                                               "bounded_legs": 0, "bound_cost_usd": 0.0,
                                               "groups": []}


def by_key(data):
    return {g["key"]: g for g in data["groups"]}


def test_group_by_model(filled):
    groups = by_key(filled.rollup(group_by="model"))
    assert set(groups) == {"openai/gpt-4o-mini", "myvllm/qwen3-8b", "mystery/x"}
    gpt = groups["openai/gpt-4o-mini"]
    assert gpt == {"key": "openai/gpt-4o-mini", "legs": 3, "input_tokens": 100,
                   "output_tokens": 10, "reasoning_tokens": 0, "cached_tokens": 0,
                   "cost_usd": 0.03, "unknown_cost_legs": 1, "failed_legs": 2,
                   "suspect_legs": 0}
    assert groups["mystery/x"]["cost_usd"] == 0.0
    assert groups["mystery/x"]["unknown_cost_legs"] == 1
    assert groups["mystery/x"]["cached_tokens"] == 50
    assert groups["myvllm/qwen3-8b"]["reasoning_tokens"] == 7


def test_group_by_day_is_chronological_utc_dates(filled):
    data = filled.rollup(group_by="day")
    assert [(g["key"], g["legs"]) for g in data["groups"]] == [("2025-03-01", 3),
                                                               ("2025-03-02", 2)]


def test_group_by_wave_tag_status(filled):
    waves = by_key(filled.rollup(group_by="wave"))
    assert (waves["w1"]["legs"], waves["w2"]["failed_legs"], waves["w2"]["cost_usd"]) == (3, 2, 0.02)
    tags = by_key(filled.rollup(group_by="tag"))
    assert (tags["bugs"]["legs"], tags[None]["legs"]) == (2, 3)
    statuses = by_key(filled.rollup(group_by="status"))
    assert {k: g["legs"] for k, g in statuses.items()} == {"complete": 3, "error": 1, "refused": 1}
    assert statuses["complete"]["failed_legs"] == 0 and statuses["error"]["failed_legs"] == 1


@pytest.mark.parametrize("group_by", GROUP_BY)
def test_groups_add_up_to_totals(filled, group_by):
    data = filled.rollup(group_by=group_by)
    assert sum(g["legs"] for g in data["groups"]) == data["legs"]
    assert sum(g["unknown_cost_legs"] for g in data["groups"]) == data["unknown_cost_legs"]
    assert round(sum(g["cost_usd"] for g in data["groups"]), 10) == data["total_cost_usd"]


def test_bad_group_by(filled):
    with pytest.raises(OrchError, match="model, day, wave, tag, status"):
        filled.rollup(group_by="colour")


NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("7d", NOW - timedelta(days=7)),
    ("24h", NOW - timedelta(hours=24)),
    ("30m", NOW - timedelta(minutes=30)),
    ("2w", NOW - timedelta(weeks=2)),
    (" 3D ", NOW - timedelta(days=3)),
    ("2025-03-01", datetime(2025, 3, 1, tzinfo=UTC)),
    ("2025-03-01T09:30", datetime(2025, 3, 1, 9, 30, tzinfo=UTC)),
    ("2025-03-01T09:30:00Z", datetime(2025, 3, 1, 9, 30, tzinfo=UTC)),
    ("2025-03-01T11:30+02:00", datetime(2025, 3, 1, 9, 30, tzinfo=UTC)),
])
def test_parse_since(text, expected):
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "-7d", "7 days", "1y", "yesterday", "2025-13-01"])
def test_parse_since_rejects(text):
    with pytest.raises(OrchError) as info:
        parse_since(text)
    assert "30m, 24h, 7d, 2w" in str(info.value) and "ISO" in str(info.value)


def test_unopenable_ledgers_are_one_line_errors(tmp_path, monkeypatch):
    bad = tmp_path / "not-a-db.db"
    bad.write_text("this is not sqlite\n" * 100)
    with pytest.raises(OrchError, match="cannot open spend ledger"):
        Ledger(f"sqlite:///{bad}")
    with pytest.raises(OrchError, match="not a SQLAlchemy URL"):
        Ledger("not a url")


def test_password_never_shown(monkeypatch):
    monkeypatch.setenv("ORCH_LEDGER_URL", "nosuchdb+nodriver://me:hunter2@db.example/orch")
    with pytest.raises(OrchError) as info:
        Ledger()
    assert "hunter2" not in str(info.value)


WRITER = """
import sys, time
from pathlib import Path
from orchestrator.ledger.spend import Ledger
go, n = Path(sys.argv[1]), sys.argv[2]
(go.parent / f"ready-{n}").touch()
while not go.exists():
    time.sleep(0.005)
ledger = Ledger()
for i in range(50):
    ledger.append({"wave_id": "w-" + n, "leg_id": f"{n}-{i}", "kind": "leg",
                   "model": "m/x", "provider": "m", "status": "complete",
                   "input_tokens": 1, "cost_usd": 0.001, "cost_source": "declared"})
"""


def test_four_processes_lose_no_row(ledger_url, tmp_path):
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(go), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(4)]
    # Let every writer finish its slow imports, then release them all at once.
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
    ledger = Ledger()  # the database was empty before the writers raced to create the schema
    rows = ledger.rows()
    assert len(rows) == 200
    assert {r["leg_id"] for r in rows} == {f"{n}-{i}" for n in range(4) for i in range(50)}
    data = ledger.rollup(group_by="wave")
    assert data["legs"] == 200 and data["total_cost_usd"] == 0.2
    assert {g["key"]: g["legs"] for g in data["groups"]} == {f"w-{n}": 50 for n in range(4)}


def test_a_bound_lasts_one_operation_not_the_pooled_connections_later_users(home):
    """Another process holds the write lock. A write bounded at 0.2 s gives up; the same pooled
    SQLite connection then serves a user that sets no bound (a migration, say) and a write
    bounded at 1.5 s: each waits its own time and gets in when the lock is let go at ~0.6 s.
    Before, the 0.2 s stayed on the connection and the next user gave up after it too."""
    import threading

    import sqlalchemy as sa

    ledger = Ledger()
    ledger.append(row())
    used = []

    def checkout(dbapi_conn, _record, _proxy):
        used.append(dbapi_conn)

    sa.event.listen(ledger.engine, "checkout", checkout)
    holder = sqlite3.connect(home / "ledger.db", isolation_level=None)

    def while_locked(work):
        """``work`` in a thread while the lock is held for another ~0.6 s: its error or None."""
        failed = []

        def run():
            try:
                work()
            except Exception as exc:  # noqa: BLE001 - the test reports which call failed
                failed.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(0.6)
        holder.execute("ROLLBACK")
        thread.join(30)
        return failed[0] if failed else None

    def short_bound_gives_up():
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(OrchError, match="database is locked"):
            ledger.append_many([row(leg_id="w1-short")], deadline=time.monotonic() + 0.2)

    def no_bound_of_its_own():
        with ledger.engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE probe (x)")

    try:
        short_bound_gives_up()
        unbounded = while_locked(no_bound_of_its_own)
        short_bound_gives_up()
        longer = while_locked(lambda: ledger.append_many(
            [row(leg_id="w1-long")], deadline=time.monotonic() + 1.5))
        assert (unbounded, longer) == (None, None)
        with ledger.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    finally:
        sa.event.remove(ledger.engine, "checkout", checkout)
        holder.close()
        ledger.close()
    assert used and all(conn is used[0] for conn in used)  # one pooled connection throughout
    assert [r["leg_id"] for r in Ledger().rows()] == ["w1-a", "w1-long"]


def test_a_bound_kept_for_unread_answers_is_rolled_up(ledger):
    """A leg whose answer's cost could not be read holds its claim (``cost_bound_usd``): the
    rollup says how many such legs and the most everything can have cost."""
    ledger.append({"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m",
                   "provider": "p", "status": "complete", "cost_usd": 0.5,
                   "cost_source": "declared"})
    ledger.append({"wave_id": "w", "leg_id": "w-2", "kind": "leg", "model": "p/m",
                   "provider": "p", "status": "complete", "cost_usd": None,
                   "cost_source": "unknown", "cost_bound_usd": 4.17})
    data = ledger.rollup()
    assert (data["bounded_legs"], data["bound_cost_usd"], data["total_cost_usd"]) == (
        1, 4.67, 0.5)
