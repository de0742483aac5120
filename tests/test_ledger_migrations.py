"""The ledger's schema versions (Alembic), on SQLite and on a real PostgreSQL (``ledger_url``):
an empty database is made at head, a ledger made by the code before migrations is adopted
without losing a row, and a stale one is a one-line error naming ``orch ledger upgrade``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.ledger.schema import HEAD
from orchestrator.ledger.spend import Ledger, SchemaOutOfDate
from orchestrator.testing.scripted_server import Reply

LEGACY_DDL = Path(__file__).parent / "data" / "ledger_schema_pre_alembic.sql"
ORCH = [sys.executable, "-m", "orchestrator"]


def orch_cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def engine_for(url: str) -> sa.Engine:
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def make_legacy(url: str) -> None:
    """The schema exactly as the code on main before this change created it, with rows."""
    statements = [s.strip() for s in LEGACY_DDL.read_text().split(";")]
    engine = engine_for(url)
    with engine.begin() as conn:
        for statement in statements:
            lines = [x for x in statement.splitlines() if not x.startswith("--")]
            if not "".join(lines).strip():
                continue
            sql = "\n".join(lines)
            if engine.dialect.name == "postgresql":  # what SQLAlchemy wrote there instead
                sql = sql.replace("DATETIME", "TIMESTAMP WITHOUT TIME ZONE").replace(
                    "id INTEGER NOT NULL", "id SERIAL NOT NULL")
            conn.exec_driver_sql(sql)
        for n in range(3):
            conn.execute(sa.text(
                "INSERT INTO spend (ts, wave_id, leg_id, kind, model, provider, status, "
                "input_tokens, output_tokens, reasoning_tokens, cached_tokens, cost_usd, "
                "cost_source, duration_s, tag) VALUES ('2025-03-01 12:00:00', 'old', :leg, "
                "'leg', 'p/m', 'p', 'complete', 10, 5, 0, 0, :cost, 'priced', 1.5, 'x')"),
                {"leg": f"old-{n}", "cost": 0.25 * (n + 1)})
        conn.execute(sa.text(
            "INSERT INTO council (ts, run_id, model, role, status, reviewed, cut, "
            "findings_blocker, findings_major, findings_minor, findings_nit, confirmed, "
            "street_cred) VALUES ('2025-03-01 12:00:00', 'run-1', 'p/m', 'seat', 'reviewed', "
            "true, false, 1, 0, 0, 0, 1, 0.5)"))
    engine.dispose()


def ledger_at(url: str, revision: str, *inserts: str) -> None:
    """A ledger as an older orch left it: migrated to ``revision`` only, holding the rows
    ``inserts`` put there."""
    from alembic import command

    from orchestrator.ledger import migrate as ledger_migrate

    engine = engine_for(url)
    with engine.begin() as conn:
        cfg = ledger_migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        for insert in inserts:
            conn.execute(sa.text(insert))
    engine.dispose()


def upgraded():
    """``orch ledger upgrade`` run; then this process forgets the database, as a new process
    would know nothing of it. The command's result."""
    from orchestrator.ledger import connection as ledger_engine

    up = orch_cli("ledger", "upgrade")
    ledger_engine.dispose_all()
    return up


# one leg's row, as a ledger at 0004 to 0006 holds it
LEG_ROW = ("INSERT INTO spend (ts, wave_id, leg_id, kind, model, provider, status, "
           "input_tokens, output_tokens, reasoning_tokens, cached_tokens, cost_usd, "
           "cost_source, duration_s, seq) VALUES ('2025-03-01 12:00:00', 'w', 'w-1', 'leg', "
           "'p/m', 'p', 'complete', 10, 5, 0, 0, 0.5, 'priced', 1.5, 1)")


def revision_of(url: str) -> str | None:
    engine = engine_for(url)
    with engine.connect() as conn:
        names = sa.inspect(conn).get_table_names()
        found = conn.execute(sa.text("select version_num from alembic_version")).scalar() \
            if "alembic_version" in names else None
    engine.dispose()
    return found


def columns_of(url: str, table: str) -> set[str]:
    engine = engine_for(url)
    with engine.connect() as conn:
        names = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    engine.dispose()
    return names


def test_head_is_the_newest_migration():
    """The constant a ledger open compares with (no Alembic import) is Alembic's own head."""
    from alembic.script import ScriptDirectory

    from orchestrator.ledger import migrate as ledger_migrate

    script = ScriptDirectory.from_config(ledger_migrate._config())
    assert script.get_current_head() == HEAD
    assert ledger_migrate.known() == ["0001", "0002", "0003", "0004", "0005", "0006", "0007"]


def test_an_empty_database_is_made_at_head_and_matches_the_models(ledger_url):
    from orchestrator.ledger.council_rows import TABLE as COUNCIL
    from orchestrator.ledger.spend import TABLE as SPEND

    Ledger().append({"wave_id": "w", "leg_id": "w-a", "kind": "leg", "model": "p/m",
                     "provider": "p", "status": "complete"})
    assert revision_of(ledger_url) == HEAD
    for table in (SPEND, COUNCIL):  # the migrations and the models agree, column for column
        assert columns_of(ledger_url, table.name) == {c.name for c in table.columns}
    (got,) = Ledger().rows()
    assert got["user"] and got["host"]


def test_a_ledger_made_before_migrations_is_refused_then_upgraded_with_every_row(
        ledger_url, orch, scripted_server):
    make_legacy(ledger_url)
    with pytest.raises(SchemaOutOfDate) as info:
        Ledger()
    message = str(info.value)
    assert "\n" not in message and "orch ledger upgrade" in message and "made before" in message
    spent = orch_cli("spend", "--since", "all")
    assert spent.exit_code == 1 and spent.output.count("\n") == 1
    assert "run `orch ledger upgrade`" in spent.output
    # a fanout refuses before any request: nothing paid for a row it could not record
    orch.provider()
    scripted_server.script("m", Reply(text="ok"))
    fanned = orch_cli("fanout", "-m", "scripted/m", "-p", "x", "-q")
    assert fanned.exit_code == 1 and "orch ledger upgrade" in fanned.output
    assert scripted_server.count("m") == 0

    up = orch_cli("ledger", "upgrade")
    assert up.exit_code == 0, up.output
    assert f"upgraded from made before schema versions to revision {HEAD} (3 rows kept)" \
        in up.output
    assert revision_of(ledger_url) == HEAD
    assert {"user", "host"} <= columns_of(ledger_url, "spend")
    rows = Ledger().rows()
    assert [(r["leg_id"], r["cost_usd"], r["input_tokens"], r["tag"], r["user"])
            for r in rows] == [("old-0", 0.25, 10, "x", None), ("old-1", 0.5, 10, "x", None),
                               ("old-2", 0.75, 10, "x", None)]
    from orchestrator.ledger.council_rows import CouncilLedger

    (seat,) = CouncilLedger().rows()
    assert (seat["run_id"], seat["reviewed"], seat["street_cred"]) == ("run-1", True, 0.5)
    # now the fanout runs, and its row says who ran it; the old rows group as "(none)"
    fanned = orch_cli("fanout", "-m", "scripted/m", "-p", "x", "-q")
    assert fanned.exit_code == 0, fanned.output
    by_user = json.loads(orch_cli("spend", "--since", "all", "--group-by", "user",
                                  "--json").stdout)
    assert {g["key"]: g["legs"] for g in by_user["groups"]} == {
        None: 3, Ledger().rows()[-1]["user"]: 1}
    again = orch_cli("ledger", "upgrade")
    assert again.exit_code == 0 and "nothing to do (4 rows)" in again.output


def test_an_older_revision_names_the_upgrade_and_a_newer_one_names_orch(ledger_url):
    ledger_at(ledger_url, "0001")
    with pytest.raises(SchemaOutOfDate, match=f"at schema revision 0001, this orch needs {HEAD}; "
                                              "run `orch ledger upgrade`"):
        Ledger()
    up = orch_cli("ledger", "upgrade")
    assert up.exit_code == 0 and f"from revision 0001 to revision {HEAD}" in up.output
    engine = engine_for(ledger_url)
    with engine.begin() as conn:
        conn.execute(sa.text("update alembic_version set version_num = '9999'"))
    engine.dispose()
    from orchestrator.ledger import connection as ledger_engine

    ledger_engine.dispose_all()  # as a new process would: nothing known about this database
    with pytest.raises(SchemaOutOfDate, match="revision 9999, newer than this orch knows"):
        Ledger()
    refused = orch_cli("ledger", "upgrade")
    assert refused.exit_code == 1 and "upgrade orch on this machine" in refused.output


UPGRADER = "from orchestrator.cli import main; import sys; sys.argv = ['orch', 'ledger', " \
           "'upgrade']; main()"


@pytest.mark.slow
def test_four_machines_upgrading_at_once_migrate_once_and_keep_every_row(ledger_url):
    make_legacy(ledger_url)
    procs = [subprocess.Popen([sys.executable, "-c", UPGRADER], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=90) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert sum("upgraded from made before" in out for out, _ in outs) == 1
    assert sum("nothing to do (3 rows)" in out for out, _ in outs) == 3
    engine = engine_for(ledger_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from alembic_version")).scalar() == 1
        assert conn.execute(sa.text("select count(*) from spend")).scalar() == 3
    engine.dispose()


def test_doctor_names_the_upgrade_for_a_stale_ledger_and_never_migrates_it(ledger_url):
    make_legacy(ledger_url)
    result = orch_cli("doctor", "--json")
    (row,) = [r for r in json.loads(result.stdout)["checks"] if r["check"] == "ledger"]
    assert row["status"] == "warn" and "3 rows" in row["detail"]
    assert "schema at revision (none)" in row["detail"] and "orch ledger upgrade" in row["fix"]
    assert revision_of(ledger_url) is None  # doctor only looks


def test_0003_adopts_old_rows_without_a_sequence_even_two_of_one_leg(ledger_url):
    """A ledger at 0002 holding two rows of one leg (a plugin's own row beside the leg's, an
    old double replay) upgrades as it is: its rows keep ``seq`` null, outside the unique key;
    the leg rows written afterwards are keyed."""
    from orchestrator.ledger.in_flight import IN_FLIGHT

    unsequenced = ("INSERT INTO spend (ts, wave_id, leg_id, kind, model, provider, status, "
                   "input_tokens, output_tokens, reasoning_tokens, cached_tokens, cost_usd, "
                   "cost_source, duration_s) VALUES ('2025-03-01 12:00:00', 'w', 'w-1', "
                   "'leg', 'p/m', 'p', 'complete', 10, 5, 0, 0, 0.5, 'priced', 1.5)")
    ledger_at(ledger_url, "0002", unsequenced, unsequenced)
    up = upgraded()
    assert up.exit_code == 0 and f"from revision 0002 to revision {HEAD} (2 rows kept)" in \
        up.output, up.output
    ledger = Ledger()
    assert [(r["leg_id"], r["seq"]) for r in ledger.rows()] == [("w-1", None), ("w-1", None)]
    row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
           "status": "aborted", "reason": IN_FLIGHT, "input_tokens": 7, "seq": 1}
    ledger.append(row)
    ledger.append(row)  # keyed now: once
    assert sorted((r["seq"] or 0, r["input_tokens"]) for r in ledger.rows()) == [
        (0, 10), (0, 10), (1, 7)]
    engine = engine_for(ledger_url)
    with engine.connect() as conn:
        indexes = {i["name"]: i for i in sa.inspect(conn).get_indexes("spend")}
    engine.dispose()
    assert indexes["ux_spend_leg"]["unique"]


def test_0004_adds_the_judges_votes_keeping_every_council_row(ledger_url):
    """A ledger at 0003 with council rows upgrades to a ``council_vote`` table (the judges'
    votes `orch council stats --judges` reads) with its rows kept; vote rows then go in."""
    from orchestrator.ledger.council_rows import CouncilLedger

    ledger_at(ledger_url, "0003",
              "INSERT INTO council (ts, run_id, model, role, status, reviewed, cut, "
              "findings_blocker, findings_major, findings_minor, findings_nit, confirmed) "
              "VALUES ('2025-03-01 12:00:00', 'run-1', 'p/m', 'seat', 'reviewed', true, false, "
              "1, 0, 0, 0, 1)")
    up = upgraded()
    assert up.exit_code == 0 and f"from revision 0003 to revision {HEAD}" in up.output, \
        up.output
    ledger = CouncilLedger()
    assert [r["run_id"] for r in ledger.rows()] == ["run-1"]
    vote = {"run_id": "run-2", "judge": "p/m", "finding": "F1", "grp": "G1", "position": 0,
            "shown": 2, "vote": "agree", "tier": "confirmed", "eligible": True}
    ledger.append([], votes=[vote])
    assert [(v["judge"], v["vote"], v["position"]) for v in ledger.votes()] == \
        [("p/m", "agree", 0)]


def test_0005_adds_the_cost_bound_and_keeps_every_row(ledger_url):
    """A ledger at 0004 upgrades in place: its rows keep ``cost_bound_usd`` null (every cost
    they hold was read), and a bound written afterwards is kept (docs/spend.md)."""
    ledger_at(ledger_url, "0004", LEG_ROW)
    up = upgraded()
    assert up.exit_code == 0 and f"from revision 0004 to revision {HEAD} (1 rows kept)" in \
        up.output, up.output
    ledger = Ledger()
    ledger.append({"wave_id": "w", "leg_id": "w-2", "kind": "leg", "model": "p/m",
                   "provider": "p", "status": "complete", "cost_usd": None,
                   "cost_source": "unknown", "seq": 1, "cost_bound_usd": 4.17})
    assert sorted((r["leg_id"], r["cost_bound_usd"]) for r in ledger.rows()) == [
        ("w-1", None), ("w-2", 4.17)]


def test_0007_adds_the_parent_wave_and_keeps_every_row(ledger_url):
    """A ledger at 0006 upgrades in place: its rows keep ``parent_wave_id`` null (none was a
    follow-up), and a follow-up's rows written afterwards name their parent, found by it
    through its index (docs/fanout.md)."""
    ledger_at(ledger_url, "0006", LEG_ROW)
    assert "parent_wave_id" not in columns_of(ledger_url, "spend")
    up = upgraded()
    assert up.exit_code == 0 and f"from revision 0006 to revision {HEAD} (1 rows kept)" in \
        up.output, up.output
    ledger = Ledger()
    ledger.append({"wave_id": "v", "leg_id": "v-1", "kind": "leg", "model": "p/m",
                   "provider": "p", "status": "complete", "seq": 1, "parent_wave_id": "w"})
    assert sorted((r["leg_id"], r["parent_wave_id"]) for r in ledger.rows()) == [
        ("v-1", "w"), ("w-1", None)]
    engine = engine_for(ledger_url)
    with engine.connect() as conn:
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("spend")}
    engine.dispose()
    assert "ix_spend_parent_wave_id" in indexes
