"""`orch runs search`: real waves, a council and a deliberation on the scripted server, found by
the text of their prompts and answers through the index, on SQLite (FTS5) and on a real
PostgreSQL (tsvector); hostile queries, inert snippets, the reindex of past runs."""

from __future__ import annotations

import json
import re

import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_council_run import script_bench
from test_deliberation import NAMES
from test_deliberation import script as script_deliberation

from orchestrator.cli import cli
from orchestrator.errors import UsageProblem
from orchestrator.ledger.search import search
from orchestrator.ledger.spend import Ledger
from orchestrator.testing.scripted_server import Reply

QUESTION = "How should the zebra service throttle its API client?"


def run_cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def found(*args: str) -> dict:
    result = run_cli("runs", "search", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def record_three(orch_kit, server) -> tuple[str, str, str]:
    """A wave, then a council, then a deliberation: all asked about the zebra service."""
    server.script("a", Reply(text="The rate limit is 40 requests per minute, per key."))
    server.script("b", Reply(text="Use a token bucket refilled every second."))
    wave = orch_kit.run_wave(["a", "b"], QUESTION).doc["wave_id"]
    script_bench(server)
    council = run_cli("council", "run", "-p", f"Review the zebra service. {QUESTION}", "-m",
                   "scripted/alpha,scripted/bravo,scripted/charlie", "--chair",
                   "scripted/delta", "--json")
    assert council.exit_code == 0, council.output
    script_deliberation(server)
    rounds = run_cli("fanout", "-m", NAMES, "-p", f"The zebra service needs an LRU cache. {QUESTION}",
                  "--json", "--tools", "none", "--rounds", "2")
    assert rounds.exit_code == 0, rounds.output
    return wave, json.loads(council.stdout)["run_id"], json.loads(rounds.stdout)["wave_id"]


def test_waves_councils_and_deliberations_are_found_newest_first(ledger_url, orch, scripted_server):
    wave, council, deliberation = record_three(orch, scripted_server)
    doc = found("zebra")
    assert doc["index"] == ("tsvector" if ledger_url.startswith("postgresql") else "fts5")
    assert [(r["id"], r["kind"]) for r in doc["runs"]] == [
        (deliberation, "deliberation"), (council, "council"), (wave, "wave")]
    assert doc["total"] == 3 and all(r["question"].endswith("zebra service throttle its API "
                                                           "client?") or "zebra" in r["question"]
                                     for r in doc["runs"])
    for run in doc["runs"]:
        for hit in run["hits"]:
            assert {hit["snippet"][s:e].lower() for s, e in hit["highlights"]} == {"zebra"}, hit
            assert hit["field"] == "prompt"
    # an answer's words find the leg that wrote them, and only its run
    bucket = found("token bucket")
    assert [r["id"] for r in bucket["runs"]] == [wave]
    (hit,) = bucket["runs"][0]["hits"]
    assert (hit["model"], hit["field"], hit["leg_id"]) == ("scripted/b", "answer", f"{wave}-2")
    assert [hit["snippet"][s:e] for s, e in hit["highlights"]] == ["token", "bucket"]
    # a council's seat, its judge and chair answers; a deliberation's rounds
    assert [r["id"] for r in found("injection")["runs"]] == [council]
    assert [r["id"] for r in found("lru_cache")["runs"]] == [deliberation]
    assert {h["kind"] for h in found("build_query")["runs"][0]["hits"]} <= {"seat", "judge",
                                                                           "chair"}
    # the language: OR, -word, prefix, "phrase" in order only
    assert [r["id"] for r in found("bucket OR injection")["runs"]] == [council, wave]
    unbucketed = {r["id"]: r for r in found("zebra -bucket")["runs"]}  # a leg matches, or not
    assert [h["model"] for h in unbucketed[wave]["hits"]] == ["scripted/a"]
    assert [r["id"] for r in found("refill*")["runs"]] == [wave]
    assert found('"bucket token"')["runs"] == []
    # --limit keeps the newest and says how many there are; the human lines show the match
    limited = found("zebra", "--limit", "1")
    assert [r["id"] for r in limited["runs"]] == [deliberation] and limited["total"] == 3
    human = run_cli("runs", "search", "token", "bucket")
    assert human.exit_code == 0
    lines = human.stdout.splitlines()
    assert lines[0].startswith(f"{wave}  wave  ") and lines[0].endswith("1 leg(s) match")
    assert lines[1] == f"  {QUESTION}"
    assert lines[2].startswith(  # (PostgreSQL's headline ends at the last word)
        "  leg scripted/b answer: Use a **token** **bucket** refilled every second")
    assert run_cli("runs", "search", "zebra", "--limit", "2").stdout.splitlines()[-1] == \
        "showing the newest 2 of 3 runs; --limit shows more"
    assert run_cli("runs", "search", "nothing-like-this").stdout == \
        "no runs match 'nothing-like-this'\n"


HOSTILE = ['"', 'NEAR(', 'NEAR(a b', '*', 'OR', 'AND', 'NOT', '-', '- -', '"unclosed zebra',
           'zebra:x', 'prompt:zebra', '^zebra', '(zebra', 'zebra)', "zebra'", "'; drop table x",
           'a & b | !c', 'zebra:*', '\\', '\x00zebra', 'ze\u0301bra', '{zebra}', 'zebra""', '""',
           '-"zebra"', '"" OR ""', 'OR zebra OR', '*zebra', 'z' * 3000]


def test_hostile_queries_never_traceback(ledger_url, orch, scripted_server):
    scripted_server.script("a", Reply(text="The zebra crossing is near the station."))
    orch.run_wave(["a"], "Where is the zebra crossing?")
    for text in HOSTILE:
        result = orch_cli_search(text)
        assert result.exit_code in (0, 2), (text, result.output)
        assert "Traceback" not in result.output, text
        if result.exit_code == 2:
            assert result.stdout == "" and result.stderr.count("\n") == 1, (text, result.stderr)
            assert result.stderr.startswith("orch: error: ")
    assert [r["kind"] for r in found("NEAR(")["runs"]] == ["wave"]  # searched as the word
    assert found('zebra:crossing')["runs"]  # not FTS5's column filter: the phrase
    empty = run_cli("runs", "search")
    assert empty.exit_code == 2 and empty.stderr.count("\n") == 1
    assert "needs words to find" in empty.stderr
    ledger = Ledger()

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.text(alphabet=st.sampled_from('az"*()-:^\'\\ ORNEAD\u0301é\t'), max_size=40))
    def never_raises_but_usage(text):
        try:
            search(ledger, text, limit=3)
        except UsageProblem:
            pass

    never_raises_but_usage()


def orch_cli_search(text: str):
    return run_cli("runs", "search", "--", text)


def test_a_leading_dash_word_excludes_without_quoting(orch, scripted_server):
    scripted_server.script("a", Reply(text="red apples"))
    scripted_server.script("b", Reply(text="green apples"))
    orch.run_wave(["a"], "fruit?")
    green = orch.run_wave(["b"], "fruit?").doc["wave_id"]
    result = run_cli("runs", "search", "apples", "-red", "--json")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.stdout)["runs"]] == [green]


def test_snippets_are_inert_on_the_terminal_and_in_pipes(orch, scripted_server, capsys):
    hostile = "zebra \x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07 \u202eeulav\u202c \x9b31m done"
    scripted_server.script("a", Reply(text=hostile))
    orch.run_wave(["a"], "zebra?")
    piped = run_cli("runs", "search", "zebra").stdout
    assert "\x1b" not in piped and "\u202e" not in piped and "\x9b" not in piped
    assert "\\x1b[2J" in piped and "\\u202e" in piped and "**zebra**" in piped
    from orchestrator.app.search import searched
    from orchestrator.cli.runs_search import _print

    _print(searched("zebra"), terminal=True)
    drawn = capsys.readouterr().out
    assert "\x1b[1mzebra\x1b[0m" in drawn  # orch's own bold around the match
    assert "\\x1b[2J" in drawn and "\\u202e" in drawn and "\x1b[2J" not in drawn
    assert "\x1b]52" not in drawn and "\u202e" not in drawn


def test_runs_recorded_before_the_index_are_indexed_once_by_reindex(ledger_url, orch,
                                                                    scripted_server):
    scripted_server.script("a", Reply(text="The answer mentions kestrel twice: kestrel."))
    first = orch.run_wave(["a"], "Which bird?").doc["wave_id"]
    chaired = orch.run_wave(["a", "a"], "Which kestrel?", chair="a").doc["wave_id"]
    engine = Ledger().engine
    with engine.begin() as conn:  # as if they were recorded before the index existed
        conn.execute(sa.text("DELETE FROM search_doc"))
    assert found("kestrel")["runs"] == []
    again = run_cli("runs", "search", "--reindex")
    assert again.exit_code == 0, again.output
    assert re.match(r"indexed 4 leg\(s\) of 2 wave\(s\) \(4 new\) with ", again.stdout)
    doc = found("kestrel")
    assert [r["id"] for r in doc["runs"]] == [chaired, first]
    assert {h["kind"] for h in doc["runs"][0]["hits"]} >= {"chair"}
    assert run_cli("runs", "search", "--reindex", "--json").stdout.count('"added": 0') == 1
    assert found("kestrel") == doc  # the same index, not twice the rows
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM search_doc")).scalar() == 4
    # a ledger from before the index: `orch ledger upgrade` indexes this machine's runs
    from alembic import command

    from orchestrator.ledger import connection, migrate
    from orchestrator.ledger.search_table import REVISION

    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, migrate._script().get_revision(REVISION).down_revision)
    connection.dispose_all()
    refused = run_cli("runs", "search", "kestrel")
    assert refused.exit_code == 1 and "run `orch ledger upgrade`" in refused.stderr
    up = run_cli("ledger", "upgrade")
    assert up.exit_code == 0, up.output
    assert "indexed 4 leg(s) of 2 wave(s) under " in up.stdout
    assert found("kestrel") == doc


KEY = "sk-search-test-0123456789abcdefghijklmnop"  # the provider's key: registered as read
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2nX8kqU0lXf1\n"
       "h7Y8oGq2VbQk9XWmT2dLrP4sZ1cN6aE5fJ3tY0uHxI7wRvKe\n-----END RSA PRIVATE KEY-----")
AWS = "AKIAZ3MSJV4WXCVB7NQA"
SECRETS = (KEY, "0123456789abcdefghijklmnop", "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2nX8kqU0lXf1",
           "h7Y8oGq2VbQk9XWmT2dLrP4sZ1cN6aE5fJ3tY0uHxI7wRvKe", AWS)


def keyed_wave(orch, server, monkeypatch, **spec):
    """A wave whose prompt carries a private key and an AWS key (a context file, say) and
    whose answer echoes the provider's key, a key block and the AWS key."""
    monkeypatch.setenv("SCRIPTED_KEY", KEY)
    orch.provider(api_key_env="SCRIPTED_KEY")
    server.script("a", Reply(text=f"zebra: use {KEY} with\n{PEM}\nand {AWS} to deploy."))
    return orch.run_wave(["a"], f"zebra deploy notes:\n{PEM}\naws {AWS}\n", **spec)


def index_text(url: str) -> str:
    """Everything the index holds, as text: each doc's columns, and the index's own terms
    (FTS5's vocabulary, PostgreSQL's tsvector)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        rows = [" ".join(map(str, r)) for r in conn.execute(sa.text("SELECT * FROM search_doc"))]
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, search_fts, "
                                 "'row')")
            rows += [r[0] for r in conn.exec_driver_sql("SELECT term FROM temp.v")]
    engine.dispose()
    return "\n".join(rows)


def test_no_key_value_or_withheld_credential_lands_in_the_index(ledger_url, orch, scripted_server,
                                                                 monkeypatch, orch_home):
    run = keyed_wave(orch, scripted_server, monkeypatch)
    assert run.leg["status"] == "complete"
    held = index_text(ledger_url)
    assert "zebra" in held and "[withheld: private-key]" in held and "***" in held
    for secret in SECRETS:
        assert secret not in held and secret.lower() not in held, secret
    if ledger_url.startswith("sqlite"):  # the database's own bytes, its log included
        raw = b"".join(p.read_bytes() for p in orch_home.glob("ledger.db*"))
        for secret in SECRETS:
            assert secret.encode() not in raw and secret.lower().encode() not in raw, secret
    hit = found("zebra")["runs"][0]["hits"][0]
    assert "[withheld: private-key]" in hit["snippet"] or "***" in hit["snippet"]
    for secret in SECRETS:
        assert found(secret)["runs"] == [], secret  # nothing to find by a key's own text


def test_a_stalled_index_holds_up_no_billed_row_and_no_wave(ledger_url, orch, scripted_server,
                                                            monkeypatch, orch_home):
    """PostgreSQL: another session holds search_doc locked; SQLite: the index table is gone.
    Either way the wave ends within the index's wait, every billed row is in the ledger (none
    in the outbox), the docs wait in the index journal (admitted: no key in it), and the next
    open puts them in the index."""
    from orchestrator.ledger import outbox

    monkeypatch.setenv("ORCH_INDEX_WAIT_S", "0.3")
    holder = sa.create_engine(ledger_url, poolclass=sa.pool.NullPool)
    Ledger()  # made at head
    conn = holder.connect()
    if holder.dialect.name == "postgresql":
        conn.exec_driver_sql("BEGIN")
        conn.exec_driver_sql("LOCK TABLE search_doc IN ACCESS EXCLUSIVE MODE")
    else:
        conn.exec_driver_sql("ALTER TABLE search_doc RENAME TO search_doc_away")
        conn.commit()
    try:
        run = keyed_wave(orch, scripted_server, monkeypatch)
        assert run.doc["exit_code"] == 0 and run.doc["notices"] == []
        rows = Ledger(replay=False).rows(wave_id=run.doc["wave_id"])
        assert [(r["status"], r["seq"]) for r in rows] == [("complete", 1)]
        assert outbox.pending(ledger_url) == 0
        journals = [p for p in outbox.index_locations(ledger_url) if p.exists()]
        journal = b"".join(p.read_bytes() for p in journals)
        assert run.doc["wave_id"].encode() in journal
        for secret in SECRETS:
            assert secret.encode() not in journal, secret
    finally:
        if holder.dialect.name == "postgresql":
            conn.exec_driver_sql("ROLLBACK")
        else:
            conn.exec_driver_sql("ALTER TABLE search_doc_away RENAME TO search_doc")
            conn.commit()
        conn.close()
        holder.dispose()
    assert [r["id"] for r in found("zebra")["runs"]] == [run.doc["wave_id"]]  # replayed
    assert not any(p.exists() for p in outbox.index_locations(ledger_url))


def test_a_sqlite_without_fts5_searches_by_scanning_and_says_so(orch, scripted_server,
                                                                monkeypatch):
    from orchestrator.ledger import search_table

    with monkeypatch.context() as patched:
        patched.setattr(search_table, "fts5_available", lambda conn: False)
        scripted_server.script("a", Reply(text="Throttle with a token bucket."))
        wave = orch.run_wave(["a"], "How to throttle?").doc["wave_id"]
        result = run_cli("runs", "search", "token", "bucket", "--json")
        assert result.exit_code == 0, result.output
        assert result.stderr == ("orch: note: this Python's SQLite has no FTS5: the search "
                                 "read every indexed leg (slower; docs/operations.md)\n")
        doc = json.loads(result.stdout)
        assert doc["index"] == "scan" and [r["id"] for r in doc["runs"]] == [wave]
        hit = doc["runs"][0]["hits"][0]
        assert [hit["snippet"][s:e] for s, e in hit["highlights"]] == ["token", "bucket"]
        assert found("bucket -token")["runs"] == [] and found("throttle OR nothing")["runs"]
    # a SQLite with FTS5 opens the same ledger: --reindex makes the index
    again = run_cli("runs", "search", "--reindex")
    assert again.exit_code == 0 and again.stdout.endswith("with SQLite FTS5\n")
    assert found("token bucket")["index"] == "fts5"
    assert [r["id"] for r in found("token bucket")["runs"]] == [wave]


def test_the_orch_command_searches_and_refuses_in_one_line(orch, scripted_server):
    """The real entry point, once: found on stdout (exit 0), a query with nothing to find one
    line on stderr (exit 2), a mistyped option named (exit 2)."""
    import subprocess
    import sys

    scripted_server.script("a", Reply(text="Backpressure comes from the bounded queue."))
    wave = orch.run_wave(["a"], "Where does backpressure come from?").doc["wave_id"]

    def orch_process(*args):
        return subprocess.run([sys.executable, "-m", "orchestrator", "runs", "search", *args],
                              capture_output=True, text=True, timeout=120)

    hit = orch_process("bounded", "queue", "-nothing")
    assert hit.returncode == 0 and hit.stderr == ""
    assert hit.stdout.splitlines()[0].startswith(f"{wave}  wave  ")
    assert "**bounded** **queue**" in hit.stdout
    quote = orch_process('"')
    assert quote.returncode == 2 and quote.stdout == "" and quote.stderr.count("\n") == 1
    assert quote.stderr.startswith("orch: error: nothing to search for in '\"'")
    typo = orch_process("queue", "--limt", "3")
    assert typo.returncode == 2 and "has no option --limt" in typo.stderr
    assert "Traceback" not in quote.stderr + typo.stderr


def test_the_index_stands_aside_while_a_billed_row_is_on_its_way(tmp_path, monkeypatch):
    """A leg's doc handed over while another leg's billed row waits on a locked SQLite ledger:
    the index's writer starts no write until that row is in (the row never queues behind the
    index's admission or its transaction, nor races it for SQLite's one writer); then the doc
    is written and found."""
    import sqlite3
    import time

    import anyio

    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.ledger import search_table

    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    Ledger(url)  # made at head
    real_put, writes = search_table.put, []

    def put(conn, docs):  # observed, then the real write
        writes.append(time.monotonic())
        return real_put(conn, docs)

    monkeypatch.setattr(search_table, "put", put)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write: the row must wait for it
    released: list[float] = []

    async def main() -> None:
        sink = LedgerSink(url)
        row = {"wave_id": "w-aside", "leg_id": "w-aside-0", "kind": "leg", "model": "p/m",
               "provider": "p", "status": "complete", "seq": 1, "input_tokens": 9,
               "output_tokens": 4, "cost_usd": 0.001, "cost_source": "priced"}
        async with anyio.create_task_group() as tg:
            tg.start_soon(sink.append, row)
            while sink.rows_idle.is_set():  # the row is on its way
                await anyio.sleep(0.005)
            sink.search.add(wave_id="w-aside", leg_id="w-aside-1", run_id=None, kind="leg",
                            model="p/m", status="complete", tag=None, ts=None,
                            prompt="Where do zebras sleep?", answer="Standing up, mostly.")
            for _ in range(40):  # the window an index that did not stand aside writes in
                if writes:
                    break
                await anyio.sleep(0.01)
            released.append(time.monotonic())
            holder.execute("COMMIT")
        await sink.search.settle()

    try:
        anyio.run(main)
    finally:
        holder.close()
    assert writes and writes[0] >= released[0], "the index wrote while a billed row waited"
    ledger = Ledger(url, replay=False)
    assert [(r["leg_id"], r["seq"]) for r in ledger.rows(wave_id="w-aside")] == [("w-aside-0", 1)]
    assert search(ledger, "zebras").total == 1
