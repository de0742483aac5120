"""The search index: what it costs a recorded leg, and a search over 10,000 indexed legs.

Run by hand: ``.venv/bin/python bench/bench_search.py [--legs 400] [--reps 5] [--docs 10000]``
(PostgreSQL too when ``ORCH_PG_BINDIR`` or ``pg_ctl`` is there; ``--no-postgres`` skips it;
``--only legs|search`` runs one half, written to ``search_legs.json`` / ``search_search.json``).

1. **Per leg.** What a wave's leg end does, in one process on a real SQLite ledger: the leg's
   final row through the wave's ``LedgerSink.append`` (8 legs ending at once, as a wave's do),
   then its doc handed to the index (``sink.search.add``) and the wave's end waiting for it
   (``settle``). Baseline: the same with the hand-over a no-op (the code before the index).
   Alternating, order swapped every repetition. Reported: wall and CPU (the writer thread's
   admission and write included) per leg, and each billed row's own wait, p50 and p95.
2. **Search.** 10,000 legs (2,500 runs of 4; a 60-word prompt per run, a 300-word answer per
   leg, words drawn Zipf-like from 5,000) put in the index; then ``search()`` for a rare word,
   a common one (every run), a phrase, a prefix and an OR, ``limit`` 20, median of 9 each.
   On SQLite's FTS5, the same ledger without FTS5 (the scan a SQLite built without it falls
   back to: the baseline), and PostgreSQL's tsvector.

Writes bench/results/search.json (or the half's file).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, offline, write_result

QUERIES = {"rare word": "zyzzyva", "common word": "w1", "phrase": '"w2 w3"', "prefix": "w12*",
           "OR": "zyzzyva OR quokka"}


def words(rng: random.Random, n: int) -> str:
    # Zipf-like: w1 is in nearly every answer, w4999 in few
    return " ".join(f"w{min(4999, int(rng.paretovariate(1.1)))}" for _ in range(n))


def leg_cost(legs: int, reps: int, tmp: Path) -> dict:
    import anyio

    from orchestrator.engine.index_sink import IndexSink
    from orchestrator.engine.ledger_sink import LedgerSink

    rng = random.Random(1)
    prompt = words(rng, 60) + "\n" + words(rng, 300)  # a question and some context
    answers = [words(rng, 300) for _ in range(16)]
    real_add = IndexSink.add
    samples: dict[str, list[float]] = {"rows only": [], "rows + index": []}
    cpu: dict[str, list[float]] = {"rows only": [], "rows + index": []}
    waits: dict[str, list[float]] = {"rows only": [], "rows + index": []}

    async def wave(n: int, side: str, url: str) -> None:
        sink = LedgerSink(url)
        wave_id = f"bench-{side.replace(' ', '')}-{n}"

        async def leg(k: int) -> None:
            row = {"wave_id": wave_id, "leg_id": f"{wave_id}-{k}", "kind": "leg",
                   "model": "p/m", "provider": "p", "status": "complete", "seq": 1,
                   "input_tokens": 900, "output_tokens": 400, "cost_usd": 0.001,
                   "cost_source": "priced"}
            t0 = time.perf_counter()
            await sink.append(row)
            waits[side].append(time.perf_counter() - t0)
            sink.search.add(wave_id=wave_id, leg_id=row["leg_id"], run_id=None, kind="leg",
                            model="p/m", status="complete", tag=None, ts=None, prompt=prompt,
                            answer=answers[k % len(answers)])

        async with anyio.create_task_group() as tg:
            for k in range(8):
                tg.start_soon(leg, k)
        await sink.search.settle()

    url = f"sqlite:///{tmp / 'legs.db'}"
    anyio.run(wave, -1, "rows + index", url)  # warm: imports, the ledger made, the scanner
    anyio.run(wave, -2, "rows only", url)
    for side in waits:
        waits[side].clear()
    for rep in range(reps):
        for side in (["rows only", "rows + index"] if rep % 2 == 0 else
                     ["rows + index", "rows only"]):
            IndexSink.add = real_add if side == "rows + index" else (lambda self, **f: None)
            t0, c0 = time.perf_counter(), time.process_time()
            for n in range(legs // 8):
                anyio.run(wave, rep * 10_000 + n, side, url)
            samples[side].append((time.perf_counter() - t0) / legs * 1e3)
            cpu[side].append((time.process_time() - c0) / legs * 1e3)
    IndexSink.add = real_add
    out = {}
    for side in samples:
        w = sorted(waits[side])
        out[side] = {"wall_ms_per_leg": statistics.median(samples[side]),
                     "cpu_ms_per_leg": statistics.median(cpu[side]),
                     "row_wait_p50_ms": w[len(w) // 2] * 1e3,
                     "row_wait_p95_ms": w[int(len(w) * 0.95)] * 1e3}
    return out


def fill(url: str, docs: int) -> float:
    """``docs`` legs into the index at ``url`` (through the one door); seconds it took."""
    from orchestrator.ledger.search_table import PROMPT_CHARS, admitted, indexable, put
    from orchestrator.ledger.spend import Ledger

    rng = random.Random(7)
    ledger = Ledger(url)
    t0 = time.perf_counter()
    batch = []
    for run in range(docs // 4):
        prompt = indexable(words(rng, 60) + (" quokka" if run % 500 == 0 else ""), PROMPT_CHARS)
        for k in range(4):
            answer = words(rng, 300) + (" zyzzyva" if run % 250 == 0 and k == 0 else "")
            batch.append(admitted(wave_id=f"w{run:05d}", leg_id=f"w{run:05d}-{k}", kind="leg",
                                  model=f"p/m{k}", prompt=None, prompt_admitted=prompt,
                                  answer=answer, ts=f"2025-01-01T00:{run // 60 % 60:02d}:"
                                  f"{run % 60:02d}"))
        if len(batch) >= 400:
            with ledger.engine.begin() as conn:
                put(conn, batch)
            batch = []
    if batch:
        with ledger.engine.begin() as conn:
            put(conn, batch)
    return time.perf_counter() - t0


def time_queries(url: str, label: str) -> dict:
    from orchestrator.ledger.search import search
    from orchestrator.ledger.spend import Ledger

    ledger = Ledger(url)
    out = {}
    for name, text in QUERIES.items():
        times, found = [], None
        for _ in range(9):
            t0 = time.perf_counter()
            found = search(ledger, text, limit=20)
            times.append(time.perf_counter() - t0)
        out[name] = {"ms": statistics.median(times) * 1e3, "runs_matching": found.total,
                     "index": found.index}
        print(f"  {label:<22} {name:<12} {out[name]['ms']:8.1f} ms  "
              f"({found.total} runs match, {found.index})")
    return out


def without_fts(src: Path, dst: Path) -> str:
    import sqlite3

    source, conn = sqlite3.connect(src), sqlite3.connect(dst)
    source.backup(conn)  # the WAL's pages too
    source.close()
    for trigger in ("search_doc_ai", "search_doc_ad", "search_doc_au"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE search_fts")
    conn.commit()
    conn.close()
    return f"sqlite:///{dst}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legs", type=int, default=400)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--only", choices=("legs", "search"), help="One half only.")
    args = parser.parse_args()
    offline()
    result: dict = {"machine": machine(), "legs": args.legs, "reps": args.reps,
                    "docs": args.docs, "load": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["ORCH_HOME"] = str(tmp)
        os.environ["ORCH_OUTBOX_DIR"] = str(tmp / "fallback")
        if args.only != "search":
            result["per_leg"] = report_legs(leg_cost(args.legs, args.reps, tmp))
        if args.only != "legs":
            result.update(search_half(args, tmp))
    result["load_after"] = os.getloadavg()
    write_result("search" if args.only is None else f"search_{args.only}", result)


def report_legs(per_leg: dict) -> dict:
    base, with_index = per_leg["rows only"], per_leg["rows + index"]
    print(f"per leg (load {os.getloadavg()[0]:.1f}):")
    for side, fig in per_leg.items():
        print(f"  {side:<13} wall {fig['wall_ms_per_leg']:.2f} ms  cpu "
              f"{fig['cpu_ms_per_leg']:.2f} ms  row wait p50 {fig['row_wait_p50_ms']:.2f} "
              f"ms p95 {fig['row_wait_p95_ms']:.2f} ms")
    print(f"  index: +{with_index['wall_ms_per_leg'] - base['wall_ms_per_leg']:.2f} ms wall, "
          f"+{with_index['cpu_ms_per_leg'] - base['cpu_ms_per_leg']:.2f} ms cpu a leg "
          f"(x{with_index['wall_ms_per_leg'] / base['wall_ms_per_leg']:.2f} wall)")
    return per_leg


def search_half(args, tmp: Path) -> dict:
    result: dict = {}
    db = tmp / "search.db"
    url = f"sqlite:///{db}"
    print(f"filling {args.docs:,} legs ...")
    result["fill_s"] = {"sqlite": fill(url, args.docs)}
    result["sqlite_bytes"] = sum(p.stat().st_size for p in tmp.glob("search.db*"))  # + WAL
    print(f"search over {args.docs:,} indexed legs (limit 20, median of 9):")
    result["search"] = {"sqlite fts5": time_queries(url, "SQLite FTS5")}
    scan = without_fts(db, tmp / "scan.db")
    result["search"]["sqlite scan"] = time_queries(scan, "SQLite scan (no FTS5)")
    if not args.no_postgres:
        from orchestrator.testing import postgres

        why = postgres.unavailable()
        if why:
            print(f"  PostgreSQL skipped: {why}")
        else:
            cluster = postgres.Cluster()
            try:
                pg = cluster.new_database()
                result["fill_s"]["postgresql"] = fill(pg, args.docs)
                result["search"]["postgresql tsvector"] = time_queries(
                    pg, "PostgreSQL tsvector")
            finally:
                from orchestrator.ledger import connection

                connection.dispose_all()
                cluster.close()
    return result


if __name__ == "__main__":
    main()
