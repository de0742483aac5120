"""A ledger a team shares, on SQLite and on a real PostgreSQL (``ledger_url``): 8 concurrent
``orch fanout`` processes lose no row, every row says who and where, ``spend --group-by
user``, ``ledger export``, the documented SQL, and the outbox when PostgreSQL is down."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.ledger.spend import Ledger
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]
DOC = Path(__file__).parent.parent / "docs" / "ledger.md"


def orch_cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def row(**overrides):
    base = {"wave_id": "w1", "leg_id": "w1-a", "kind": "leg", "model": "p/m", "provider": "p",
            "status": "complete", "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01,
            "cost_source": "priced"}
    return {**base, **overrides}


def by_key(data):
    return {g["key"]: g for g in data["groups"]}


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, ORCH_HOME=str(home))
    env.update(extra)
    env.pop("ORCH_RUNS_DIR", None)
    return env


def test_rows_say_who_and_where_and_group_by_them(ledger_url, monkeypatch):
    import socket

    ledger = Ledger()
    monkeypatch.setenv("ORCH_USER", "alice")
    ledger.append(row(leg_id="a1"))
    ledger.append(row(leg_id="a2", kind="chair", cost_usd=0.02))
    monkeypatch.setenv("ORCH_USER", "  ")  # blank: the OS user, never an empty name
    ledger.append(row(leg_id="o1", cost_usd=None, cost_source="unknown"))
    monkeypatch.setenv("ORCH_USER", "bob")
    ledger.append(row(leg_id="b1", host="build-7"))  # a caller's own value is kept
    got = {r["leg_id"]: (r["user"], r["host"]) for r in ledger.rows()}
    me = got["o1"][0]
    assert me and me.strip() == me and me not in ("alice", "bob")
    assert got == {"a1": ("alice", socket.gethostname()), "a2": ("alice", socket.gethostname()),
                   "o1": (me, socket.gethostname()), "b1": ("bob", "build-7")}
    users = by_key(ledger.rollup(group_by="user"))
    assert {k: (g["legs"], g["cost_usd"], g["unknown_cost_legs"]) for k, g in users.items()} == {
        "alice": (2, 0.03, 0), "bob": (1, 0.01, 0), me: (1, 0.0, 1)}
    hosts = by_key(ledger.rollup(group_by="host"))
    assert {k: g["legs"] for k, g in hosts.items()} == {socket.gethostname(): 3, "build-7": 1}
    kinds = by_key(ledger.rollup(group_by="kind"))
    assert {k: g["legs"] for k, g in kinds.items()} == {"leg": 3, "chair": 1}
    table = orch_cli("spend", "--since", "all", "--group-by", "user")
    assert table.exit_code == 0, table.output
    lines = {line.split()[0]: line.split() for line in table.output.splitlines()
             if line.split() and line.split()[0] in ("alice", "bob")}
    assert lines["alice"][1] == "2" and lines["alice"][-1] == "$0.0300"
    assert lines["bob"][-1] == "$0.0100"
    assert "4 legs, $0.0400 total" in table.output


def test_export_csv_and_jsonl_every_column_since(ledger_url, monkeypatch):
    monkeypatch.setenv("ORCH_USER", "carol")
    now = datetime.now(UTC)
    Ledger().append_many([
        row(leg_id="old", ts=now - timedelta(days=40), cost_usd=9.0),
        row(leg_id="new", ts=now - timedelta(days=1), cost_usd=None, cost_source="unknown",
            reason="timeout: 'quoted', comma\nnewline", tag="review"),
    ])
    out = orch_cli("ledger", "export", "--since", "30d", "--format", "csv")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [r["leg_id"] for r in rows] == ["new"]
    (new,) = rows
    assert new["cost_usd"] == "" and new["user"] == "carol" and new["host"]
    assert new["reason"] == "timeout: 'quoted', comma\nnewline" and new["tag"] == "review"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", new["ts"])
    everything = orch_cli("ledger", "export", "--since", "all", "--format", "jsonl")
    docs = [json.loads(line) for line in everything.stdout.splitlines()]
    assert [d["leg_id"] for d in docs] == ["old", "new"]
    assert docs[0]["cost_usd"] == 9.0 and docs[1]["cost_usd"] is None
    assert set(docs[0]) == set(rows[0]) and "user" in docs[0] and "id" in docs[0]
    bad = orch_cli("ledger", "export", "--since", "yesterday")
    assert bad.exit_code == 2 and "cannot read --since" in bad.output
    usage = orch_cli("ledger", "export", "--format", "xml")
    assert usage.exit_code == 2


def doc_query(dialect: str) -> str:
    text = DOC.read_text()
    match = re.search(rf"```sql\n(-- cost per person per week \({dialect}\)\n.*?)```", text,
                      re.S)
    assert match, f"docs/ledger.md lost its {dialect} query"
    return match.group(1)


def test_the_documented_cost_per_person_per_week_query(ledger_url):
    """docs/ledger.md's query for this backend, run as written, on rows of two weeks."""
    now = datetime.now(UTC).replace(microsecond=0)
    this_monday = (now - timedelta(days=now.weekday())).date()
    last_monday = this_monday - timedelta(days=7)
    ledger = Ledger()
    ledger.append_many([
        row(leg_id="1", ts=now, user="alice", cost_usd=0.5),
        row(leg_id="2", ts=now, user="alice", cost_usd=None, cost_source="unknown"),
        row(leg_id="3", ts=now, user="bob", cost_usd=1.25),
        row(leg_id="4", ts=datetime.combine(last_monday, datetime.min.time(), UTC),
            user="alice", cost_usd=2.0),
        row(leg_id="5", ts=now - timedelta(weeks=30), user="alice", cost_usd=100.0),  # too old
    ])
    dialect = "PostgreSQL" if ledger.engine.dialect.name == "postgresql" else "SQLite"
    with ledger.engine.connect() as conn:
        got = [tuple(r) for r in conn.exec_driver_sql(doc_query(dialect))]
    got = [(str(w), p, int(c), float(usd), int(u)) for w, p, c, usd, u in got]
    assert got == [(str(this_monday), "bob", 1, 1.25, 0),
                   (str(this_monday), "alice", 2, 0.5, 1),
                   (str(last_monday), "alice", 1, 2.0, 0)]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_eight_concurrent_fanouts_lose_no_row(orch, scripted_server, orch_home, ledger_url):
    """8 processes x 5 legs = 40 rows, each process a different person. Each is an `orch
    fanout` process of its own, forked warm (orchestrator/testing/warm.py): the promise is the
    ledger under eight writers at once, not eight cold imports of litellm."""
    from orchestrator.testing import warm

    orch.provider()
    scripted_server.script("m", Reply(text="ok", latency=0.2))
    procs = [warm.start(["fanout", "-m", ",".join(["scripted/m"] * 5), "-p", "x", "-q",
                         "--tag", f"p{i}"], env=env_for(orch_home, ORCH_USER=f"user{i}"))
             for i in range(8)]
    assert len({p.pid for p in procs} | {os.getpid()}) == 9  # eight processes, none this one
    for p in procs:
        done = p.wait(timeout=500)
        assert done.returncode == 0, done.stderr
    rows = Ledger().rows()
    assert len(rows) == 40 and len({(r["wave_id"], r["leg_id"]) for r in rows}) == 40
    assert {(r["tag"], r["user"]) for r in rows} == {(f"p{i}", f"user{i}") for i in range(8)}
    spent = orch_cli("spend", "--since", "all", "--group-by", "user", "--json")
    assert {g["key"]: g["legs"] for g in json.loads(spent.stdout)["groups"]} == {
        f"user{i}": 5 for i in range(8)}
    assert scripted_server.count("m") == 40


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_postgres_down_rows_wait_in_the_outbox_and_replay_once(
        orch, scripted_server, orch_home, pg_cluster, monkeypatch):
    """The server is stopped while a wave runs: the wave completes, its rows are journaled
    locally; once the server is back the next command replays them, exactly once. The URL's
    password is never printed, nor written anywhere under ORCH_HOME."""
    password = "pw-Zebra-93517"
    url = pg_cluster.new_database().replace("postgres@", f"postgres:{password}@")
    monkeypatch.setenv("ORCH_LEDGER_URL", url)
    Ledger().close()  # the schema exists; the team's database was fine until now
    orch.provider()
    scripted_server.script("m", Reply(text="ok"))
    outputs = []
    pg_cluster.stop()
    try:
        fanned = subprocess.run([*ORCH, "fanout", "-m", "scripted/m,scripted/m,scripted/m",
                                 "-p", "x", "--json"], env=env_for(orch_home, ORCH_USER="dana"),
                                capture_output=True, text=True, timeout=180)
        outputs += [fanned.stdout, fanned.stderr]
        assert fanned.returncode == 0, fanned.stderr
        doc = json.loads(fanned.stdout)
        assert doc["status"] == "complete" and doc["ledger_errors"] == []
        assert all("ledger_outbox" in leg for leg in doc["legs"])
        assert any("wait in the outbox" in n for n in doc["notices"])
        for args in (["spend"], ["doctor", "--json"], ["ledger", "upgrade"]):
            down = subprocess.run([*ORCH, *args], env=env_for(orch_home), capture_output=True,
                                  text=True, timeout=120)
            outputs += [down.stdout, down.stderr]
            assert down.returncode != 0 or args[0] == "doctor"
        assert "postgres:***@127.0.0.1" in outputs[-1]  # `ledger upgrade`: the URL, masked
        assert '"ledger"' in outputs[-4] and "does not answer" in outputs[-4]  # doctor
    finally:
        pg_cluster.start()
    from orchestrator.ledger import connection as ledger_engine

    ledger_engine.dispose_all()  # connections from before the restart
    spent = subprocess.run([*ORCH, "spend", "--since", "all", "--group-by", "user"],
                           env=env_for(orch_home), capture_output=True, text=True, timeout=120)
    outputs += [spent.stdout, spent.stderr]
    assert spent.returncode == 0, spent.stderr
    assert "replayed 3 rows from the ledger outbox" in spent.stdout
    assert re.search(r"^dana\s+3\b", spent.stdout, re.M)  # stamped where it was made
    again = orch_cli("spend", "--since", "all", "--json")
    assert json.loads(again.stdout)["legs"] == 3 and "replayed" not in again.output
    rows = Ledger().rows()
    assert sorted(r["leg_id"] for r in rows) == sorted(leg["leg_id"] for leg in doc["legs"])
    for text in outputs:
        assert password not in text
    for path in orch_home.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


def test_a_password_in_the_url_is_masked_in_every_message(orch_home, monkeypatch):
    """A server that is not there (a closed port): the errors name it, masked."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    password = "pw-Quokka-4471"
    monkeypatch.setenv("ORCH_LEDGER_URL",
                       f"postgresql+psycopg://team:{password}@127.0.0.1:{port}/orch")
    for args in (["spend"], ["ledger", "upgrade"], ["ledger", "export"], ["council", "stats"]):
        result = orch_cli(*args)
        assert result.exit_code == 1, (args, result.output)
        assert password not in result.output and "team:***@127.0.0.1" in result.output, args
        assert result.output.count("\n") == 1, result.output
    doctor = orch_cli("doctor", "--json")
    assert password not in doctor.output and "team:***@" in doctor.output


def test_a_ledger_url_without_its_driver_names_the_extra(orch_home, monkeypatch):
    monkeypatch.setenv("ORCH_LEDGER_URL", "mysql+nosuchdriver://u@h/db")
    result = orch_cli("spend")
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "orch: error:" in result.output and "Traceback" not in result.output


def test_the_ledger_commands_do_not_load_sqlalchemy_for_help():
    """`orch --help` and `orch ledger --help` stay fast: no SQLAlchemy, no Alembic."""
    from orchestrator.testing.imports import imported_by

    out, heavy = imported_by(["ledger", "--help"],
                             ("sqlalchemy", "alembic", "litellm", "psycopg"))
    assert out.returncode == 0, out.stderr
    assert heavy == []


def test_sqlalchemy_sees_the_same_schema_on_both_backends(ledger_url):
    Ledger()
    engine = sa.create_engine(ledger_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        indexes = {i["name"] for i in inspector.get_indexes("spend")}
    engine.dispose()
    assert {"ix_spend_ts", "ix_spend_wave_id", "ix_spend_run_id", "ix_spend_user"} <= indexes


@pytest.mark.parametrize("name", ["al\x00ice", "b\udcffob", "x" * 5000, "\u00e9ve \U0001f600"])
def test_hostile_text_is_stored_not_spooled_for_ever(ledger_url, monkeypatch, name):
    """PostgreSQL refuses NUL bytes and no driver encodes a lone surrogate: such a row would
    be refused by the database and wait in the outbox for ever. It is stored, cleaned."""
    if "\x00" not in name:  # an environment variable cannot hold a NUL: a caller's row can
        monkeypatch.setenv("ORCH_USER", name)
    Ledger().append(row(leg_id="env", reason=f"error: {name}", tag=name))
    Ledger().append(row(leg_id="given", user=name, host=name))
    env, given = Ledger().rows()
    for value in (env["user"], env["reason"], env["tag"], given["user"], given["host"]):
        assert "\x00" not in value and value.encode("utf-8")
    assert len(env["user"]) <= 200 and env["user"].strip()
    if name.isprintable():
        assert env["tag"] == name and given["user"] == name


def test_a_plain_postgresql_url_means_psycopg_3(pg_cluster, orch_home, monkeypatch):
    url = pg_cluster.new_database().replace("postgresql+psycopg://", "postgresql://")
    monkeypatch.setenv("ORCH_LEDGER_URL", url)
    Ledger().append(row())
    assert Ledger().engine.dialect.driver == "psycopg"
    from orchestrator.ledger import connection as ledger_engine

    ledger_engine.dispose_all()


def test_a_locked_postgres_table_costs_one_bound_and_loses_no_row(
        orch, scripted_server, pg_cluster, monkeypatch):
    """Another session holds an exclusive lock on the spend table: the statement timeout,
    bounded by the wave's budget, sends the rows to the outbox instead of hanging the legs."""
    import psycopg

    from orchestrator.engine import ledger_sink
    from orchestrator.runtime import litellm

    litellm()
    monkeypatch.setattr(ledger_sink, "BUDGET_S", 1.0)
    url = pg_cluster.new_database()
    monkeypatch.setenv("ORCH_LEDGER_URL", url)
    Ledger().close()
    orch.provider()
    for n in range(3):
        scripted_server.script(f"m{n}", Reply(text="ok", latency=0.2 * n))
    holder = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    holder.execute("LOCK TABLE spend IN ACCESS EXCLUSIVE MODE")
    try:
        run = orch.run_wave([f"m{n}" for n in range(3)])
    finally:
        holder.rollback()
        holder.close()
    doc = run.doc
    assert doc["status"] == "complete" and doc["ledger_errors"] == []
    assert all("ledger_outbox" in leg for leg in doc["legs"])
    assert max(leg["duration_s"] for leg in doc["legs"]) < 1.0 + 0.4 + 5
    spent = orch_cli("spend", "--since", "all", "--json")
    assert "replayed 3 rows" in spent.output
    assert json.loads(spent.stdout)["legs"] == 3
    from orchestrator.ledger import connection as ledger_engine

    ledger_engine.dispose_all()


def test_rows_spooled_before_a_password_change_still_replay(orch_home):
    from orchestrator.ledger import outbox

    old = outbox.locations("postgresql+psycopg://team:first-pw@db.example/orch")
    new = outbox.locations("postgresql+psycopg://team:second-pw@db.example/orch")
    other = outbox.locations("postgresql+psycopg://team:first-pw@db.example/other")
    assert old == new and old != other
    assert all("pw" not in str(path) for path in old)
