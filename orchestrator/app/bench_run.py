"""Running a prepared bench (or resume): settle what a killed run was billed for, run the
trials (each graded trial saved at once in the results file, marked with this process), stop
at ``maxfail`` failed trials, then write the results, the reports and the JUnit XML. Each
graded trial is an event; the end carries the results and where they are."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from orchestrator.app.bench import RUNNING
from orchestrator.errors import OrchError
from orchestrator.events import Notice, TrialEnded


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("orch", "litellm", "numpy", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def save_partial(path: Path, doc: dict[str, Any], run: dict[str, Any] | None = None,
                 warn=None) -> None:
    """The results so far, atomically, marked with the process that writes them (`orch runs`
    shows the bench running while it lives, interrupted once it is gone). A file that cannot
    be written is said once; the final write says the rest."""
    from orchestrator.pids import process_started
    from orchestrator.store import write_json_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {**doc, RUNNING: {
            "pid": os.getpid(), "pid_started": process_started(os.getpid()), **(run or {})}})
    except OSError as exc:
        if path not in _UNWRITABLE:
            _UNWRITABLE.add(path)
            if warn is not None:
                warn(f"warning: the partial results {path} cannot be written "
                     f"({exc.strerror or exc})")


_UNWRITABLE: set[Path] = set()


def interrupted(signum: int, rows: list[dict[str, Any]], planned: int,
                reason: str | None = None) -> dict[str, Any]:
    """What a signal (or --maxfail, ``reason``) left: the trials graded before it
    (complete), those it cut short (listed, excluded), and how many never started."""
    cut = [r["n"] for r in rows if str(r.get("excluded") or "").startswith("interrupted")]
    return {"signal": signum, "signal_name": reason or signal.Signals(signum).name,
            "planned": planned, "complete": [r["n"] for r in rows if r["n"] not in cut],
            "cut_short": cut, "not_started": planned - len(rows)}


def analyse(doc: dict[str, Any]) -> dict[str, Any]:
    from orchestrator.bakeoff.stats import analyse as run_stats

    s = doc["settings"]
    singles = {c["model"]: c["name"] for c in s["contestants"] if c["kind"] == "model"}
    ensembles = {c["name"]: [singles[m] for m in c.get("models") or [] if m in singles]
                 for c in s["contestants"] if c["kind"] in ("fanout", "council")}
    return run_stats(doc["trials"], [c["name"] for c in s["contestants"]], s["tasks"],
                     ensembles=ensembles)


def finish(doc: dict[str, Any], path: Path, *, probe: bool = False,
           junit: Path | None = None) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The results written (file, report.md, report.html, the JUnit XML): (document, exit
    code, where they are)."""
    from orchestrator.bakeoff import report
    from orchestrator.store import write_json_atomic

    doc["stats"] = analyse(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    md, page = report.write(doc, path.with_suffix(""))
    if junit is not None:
        from orchestrator.bakeoff import junit as junit_mod

        try:
            junit_mod.write(doc, junit)
        except OSError as exc:  # the results are saved: say so, and why the XML is not
            raise OrchError(f"--junit-xml {junit} cannot be written ({exc.strerror or exc}); "
                            f"the results are in {path}: `orch bench report` it, or pick "
                            "a writable file") from None
    where = {"results_file": str(path), "report_md": str(md), "report_html": str(page),
             "probe": probe}
    stop = doc.get("interrupted")
    if stop:
        code = 1 if not stop["signal"] else 128 + stop["signal"]
    elif probe:  # a probe is a check: every contestant must start and pass the tiny task
        code = 0 if all(r["status"] == "complete" and r["passed"] for r in doc["trials"]) \
            else 1
    else:
        code = 2 if doc["exclusions"] else 0
    return doc, code, where


def trial_line(row: dict[str, Any]) -> str:
    word = "EXCL" if row["excluded"] else "PASS" if row["passed"] else "FAIL"
    cost = "" if row["cost_usd"] is None else f" ${row['cost_usd']:.4f}"
    why = f" ({row['excluded'] or row['reason']})" if (row["excluded"] or row["reason"]) \
        else ""
    tokens = "—" if row["tokens"] is None else f"{row['tokens']:,}"  # unknown: not 0
    return (f"{word} {row['task']} · {row['contestant']} #{row['trial']} · "
            f"{row['secs']:.1f}s · {tokens} tok{cost}{why}")


async def _settle(handle, bench, guard) -> list[dict[str, Any]]:
    """The trials a killed run was billed for but never graded, settled with no request
    (bakeoff/regrade.py), each an event. An interrupt meanwhile leaves the results file as
    it was (nothing was sent)."""
    from orchestrator import config as config_mod
    from orchestrator import jobscope
    from orchestrator.bakeoff import regrade

    stopped: list[int] = []

    def stop(signum: int) -> None:
        stopped.append(signum)
        guard.running.stop()  # the check it was grading with

    class Settling:
        def interrupt(self, signum: int) -> None:
            stop(signum)

    handle._running(Settling())
    async with anyio.create_task_group() as tg:
        if handle.handle_signals:
            await tg.start(partial(jobscope.watch, stop, lambda: bool(stopped)))
        settled = await anyio.to_thread.run_sync(partial(
            regrade.settle, bench.previous, bench.plan, config_mod.runs_dir(), guard),
            abandon_on_cancel=True)
        tg.cancel_scope.cancel()
    if stopped:
        raise OrchError("interrupted while grading the answers a killed run saved; nothing "
                        "was sent and the results file is unchanged") from None
    for row in settled:
        handle.emit(TrialEnded({**row, "settled": True}))
    return settled


async def run_bench(handle) -> tuple[dict[str, Any], int, dict[str, Any]]:
    from orchestrator import config as config_mod
    from orchestrator.app.warm import import_litellm_quietly
    from orchestrator.bakeoff import resume
    from orchestrator.bakeoff.run import Runner, exclusions
    from orchestrator.engine.ledger_sink import LedgerSink

    p = handle.prepared
    bench = p.plan
    plan, previous = bench.plan, bench.previous
    guard = plan.guard(bench.bwrap, unsafe=bool(getattr(p.request, "unsafe_checks", False)))
    # the results: past answers and checks' words, hidden from what the bench runs
    guard.secret = (*guard.secret, bench.path.parent)
    again, settled = bench.again, []
    if bench.settle:
        try:
            settled = await _settle(handle, bench, guard)
        except OrchError as exc:
            raise _Interrupted(str(exc)) from None
        done = {r["n"] for r in settled}
        again = {n: why for n, why in (again or {}).items() if n not in done}
        if not again:  # nothing to send: the settled trials are the resume
            if not settled:
                return {}, 0, {"nothing": f"nothing to run: every trial of {bench.path} was "
                               "graded"}
            return finish(resume.merge(previous, [], {}, settled), bench.path,
                          junit=bench.junit)
    if previous is not None:
        counts: dict[str, int] = {}
        for why in again.values():
            counts[why] = counts.get(why, 0) + 1
        handle.emit(Notice(f"resuming {previous['bench_id']}: {len(again)} trial(s) to run ("
                           + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")"))
    if bench.link:  # `orch runs` finds it through this link
        from orchestrator.operations.runs import LINK
        from orchestrator.store import write_text_atomic

        write_text_atomic(config_mod.home() / "bench" / f"{bench.bench_id}{LINK}",
                          str(bench.path.resolve()) + "\n")
    ledger = LedgerSink().preflight()  # a stale ledger schema: one line, before spend
    if bench.resolved:
        import_litellm_quietly()
    planned = resume.total(plan)
    started = datetime.now(UTC).isoformat()
    path = bench.path

    def results(rows: list[dict[str, Any]]) -> dict[str, Any]:
        if previous is not None:
            doc = resume.merge(previous, rows, again or {}, settled)
            doc["ledger_errors"] = [*previous.get("ledger_errors", []), *ledger.errors]
            return doc
        return {"bench_id": bench.bench_id, "started": started,
                "finished": datetime.now(UTC).isoformat(), "versions": versions(),
                "model_ids": {n: m.name for n, m in bench.resolved.items()},
                "settings": plan.settings(), "trials": rows, "exclusions": exclusions(rows),
                "ledger_errors": ledger.errors,
                "prompts": {t.id: plan.render(t) for t in plan.tasks}}  # for `bench show`

    failed = [0]

    def graded(row: dict[str, Any]) -> None:
        """Each trial, once graded, is in the results file at once (marked running, with
        this process): a bench (or a resume) killed with -9 leaves every trial it paid for
        and graded, so `orch bench resume` runs only the rest."""
        handle.emit(TrialEnded(row))
        if not row["excluded"] and not row["passed"]:
            failed[0] += 1
            if bench.maxfail and failed[0] >= bench.maxfail:
                runner.stop(f"--maxfail {bench.maxfail} reached")
        save_partial(path, results([runner.rows[n] for n in sorted(runner.rows)]), run,
                     warn=lambda text: handle.emit(Notice(text)))

    runner = Runner(plan=plan, bench_id=bench.bench_id, config=p.config, pms=bench.pms,
                    resolved=bench.resolved, ledger=ledger, runs_dir=config_mod.runs_dir(),
                    on_trial=graded, guard=guard)
    if previous is not None:  # its own wave folders beside the first run's
        # the bench's account as the record holds it: what every run of it spent, and what
        # a killed one left in flight; the ceiling holds across resumes
        runner.account = resume.account(previous, plan, ledger)
        runner.wanted = set(again or {})
        n = len(previous.get("resumes") or []) + 1
        # a resume killed before it graded a trial left its waves but no entry in the file
        while any(config_mod.runs_dir().glob(f"{bench.bench_id}-r{n}-*")):
            n += 1
        runner.wave_prefix = f"r{n}-"
    # the marker says which waves this run's trials are, written before anything is sent:
    # a run killed even before its first trial was graded leaves a file to resume, and the
    # resume finds what that run was billed for (bakeoff/regrade.py)
    run = {"wave_prefix": runner.wave_prefix,
           "trials": None if runner.wanted is None else sorted(runner.wanted)}
    save_partial(path, results([]), run, warn=lambda text: handle.emit(Notice(text)))
    if handle.signum is not None:  # interrupted before any trial began
        rows, runner.signum, runner.stop_reason = [], handle.signum, None
    else:  # the runner sets itself up before its first await: an interrupt finds it ready
        handle.runner = runner
        rows = await runner.run(handle_signals=handle.handle_signals)
    doc = results(rows)
    if runner.signum is not None:
        doc["interrupted"] = interrupted(runner.signum, doc["trials"], planned,
                                         runner.stop_reason)
    return finish(doc, path, probe=bench.probe, junit=bench.junit)


class _Interrupted(OrchError):
    """An interrupt while settling a killed run's trials: exit 130, nothing sent."""

    exit_code = 130
