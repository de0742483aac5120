"""What ``orch bench`` does after parsing: resolve, check, estimate, confirm, run, save, print.

Split from ``cli/bench.py`` so the command's options stay readable; imported only when a
bench actually runs (never on ``orch --help``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import click

from orchestrator.bakeoff import contestants as cmd
from orchestrator.bakeoff.plan import Plan, describe_estimate, estimate
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.notices import say


def resolve(plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each model contestant's model and plugin manager (its disable_plugins, its tier pin)."""
    from orchestrator import runtime
    from orchestrator.bakeoff.run import TierPin
    from orchestrator.budget_guards import require_guards
    from orchestrator.models.resolve import resolve_all
    from orchestrator.notices import warn as stderr_warn
    from orchestrator.plugin_host.fail_closed import require_loaded
    from orchestrator.plugin_host.plugins import load

    cfg = runtime.config()
    resolved, pms = {}, {}
    base = cfg.section("plugins")
    for c in plan.contestants:
        if c.kind == "command":
            continue
        section = {**base, "disabled": [*base.get("disabled", []), *c.disable_plugins]}
        pms[c.name] = load(section, warn=stderr_warn, extra=[("bench_tier", TierPin())])
        require_loaded(pms[c.name], cfg)  # a guard that cannot load: nothing is sent
        # a ceiling from its flag or the bench file holds for every contestant, or none runs
        require_guards(plan.ceilings, pms[c.name], cfg, command="bench",
                       source=lambda key, name=c.name: _ceiling_source(plan, name, key))
        if c.kind in ("fanout", "council"):
            from orchestrator.bakeoff.ensemble import Ensemble

            found = resolve_all([*c.models, *([c.chair] if c.chair else [])], cfg,
                                pms[c.name])
            resolved[c.name] = Ensemble(members=found[:len(c.models)],
                                        chair=found[-1] if c.chair else None, kind=c.kind,
                                        rounds=c.rounds, aggregate=c.aggregate)
        else:
            resolved[c.name] = resolve_all([c.model], cfg, pms[c.name])[0]
    return resolved, pms


def _models_of(resolved_one: Any) -> list[Any]:
    """The resolved models behind a contestant (an ensemble has several)."""
    return list(getattr(resolved_one, "models", [resolved_one]))


def _ceiling_source(plan: Plan, contestant: str, key: str) -> str:
    """Where the bench's ceiling ``key`` was asked for: its key in the bench file, else its
    flag."""
    from orchestrator.budget_guards import flag

    in_file = (plan.config.get("bench") or {}).get(key)
    where = f"{key} in {plan.config_path}" if in_file is not None and \
        in_file == plan.ceilings.get(key) else flag(key)
    return f"{where} (contestant {contestant})"


def check_contestants(plan: Plan, resolved: dict[str, Any], unsafe: bool = False) -> int:
    """found / missing per contestant, and the sandbox when the plan needs one; no model is
    called."""
    from orchestrator.bakeoff.guard import UNSAFE_FLAG
    from orchestrator.models.addressing import check_key
    from orchestrator.sandbox import bwrap

    missing = 0
    if plan.needs_sandbox:
        why = bwrap.usable()
        state = "found" if why is None else "unconfined" if unsafe else "missing"
        missing += state == "missing"
        detail = bwrap.found() if why is None else f"{why}; {UNSAFE_FLAG}" if unsafe else \
            f"{why}; {bwrap.INSTALL_HINT}, or pass {UNSAFE_FLAG}"
        click.echo(f"sandbox: {state} ({detail})")
    for c in plan.contestants:
        if c.kind != "command":
            try:
                for model in _models_of(resolved[c.name]):
                    check_key(model)
                state, why = "found", resolved[c.name].name
            except OrchError as exc:
                state, why = "missing", str(exc)
        else:
            ok = cmd.found(c)
            state, why = ("found", c.command) if ok else \
                ("missing", f"{c.command} is not on PATH; install it or give its full path")
        missing += state == "missing"
        click.echo(f"{c.name}: {state} ({why})")
    return 1 if missing else 0


def dry_run_text(plan: Plan, resolved: dict[str, Any]) -> str:
    first = plan.tasks[0]
    lines = [f"plan: {len(plan.tasks)} tasks ({plan.source}) × {len(plan.contestants)} "
             f"contestants × {plan.trials} trials = "
             f"{len(plan.tasks) * len(plan.contestants) * plan.trials} trials, order task → "
             f"contestant → trial; {plan.jobs} model trials at once; timeout "
             f"{plan.timeout_s:g} s", f"prompt template sha256 {plan.prompt_hash}", "",
             f"first prompt ({first.id}):", plan.render(first), "", "contestants:"]
    for c in plan.contestants:
        if c.kind == "model":
            lines.append(f"  {c.name}: model {resolved[c.name].name} (tools {c.tools}, "
                         f"max_steps {c.max_steps}"
                         + (f", tier {c.tier}" if c.tier else "") + ")")
        elif c.deliberates:
            legs = len(c.models)
            lines.append(f"  {c.name}: {resolved[c.name].name} (tools {c.tools}, "
                         f"max_steps {c.max_steps}; one deliberation per trial: up to "
                         f"{c.rounds} rounds × {legs} legs = {c.rounds * legs} requests"
                         + (" + the chair" if c.chair else "")
                         + ("; the majority of the final answers graded" if c.aggregate
                            else "") + ", peers "
                         + (str(c.peers) if c.peers else "default") + ")")
        elif c.kind in ("fanout", "council"):
            lines.append(f"  {c.name}: {resolved[c.name].name} (tools {c.tools}, "
                         f"max_steps {c.max_steps}; one {'wave' if c.kind == 'fanout' else c.kind} "
                         "per trial" + ("; the majority of its answers graded" if c.aggregate
                                        else "") + ")")
        else:
            argv = cmd.command_line(c, plan.render(first), "<trial folder>", first.check)
            lines.append(f"  {c.name}: " + " ".join(_short(a) for a in argv)
                         + (" (prompt also on stdin)" if c.stdin else ""))
    if plan.needs_sandbox:
        from orchestrator.sandbox import bwrap

        why = bwrap.usable()
        lines.append("checks and command contestants: " + (
            "confined under bubblewrap" if why is None else
            f"need bubblewrap, which cannot run here ({why}): the run refuses unless "
            "--unsafe-checks"))
    return "\n".join([*lines, "", describe_estimate(estimate(plan, resolved))])


def _short(arg: str) -> str:
    import shlex

    return shlex.quote(arg if len(arg) <= 80 else arg[:77] + "...")


def confirm(plan: Plan, resolved: dict[str, Any], yes: bool) -> None:
    """Show the estimate; ask on a terminal; without one, --yes or a run ceiling (the
    cost_ceiling plugin's) is required."""
    click.echo(describe_estimate(estimate(plan, resolved)), err=True)
    if yes:
        return
    if sys.stdin.isatty():
        if not click.confirm("run the bench?", default=False, err=True):
            raise OrchError("not run: the bench was not confirmed")
        return
    if all(v is None for v in plan.ceilings.values()):
        from orchestrator.budget_guards import flag

        bound = "".join(f", or {flag(k)} USD to bound it" for k in plan.ceilings)
        raise click.UsageError(f"no terminal to confirm the spend on: pass --yes{bound}")


def trial_line(row: dict[str, Any]) -> str:
    word = "EXCL" if row["excluded"] else "PASS" if row["passed"] else "FAIL"
    cost = "" if row["cost_usd"] is None else f" ${row['cost_usd']:.4f}"
    why = f" ({row['excluded'] or row['reason']})" if (row["excluded"] or row["reason"]) \
        else ""
    tokens = "—" if row["tokens"] is None else f"{row['tokens']:,}"  # unknown: not 0
    return (f"{word} {row['task']} · {row['contestant']} #{row['trial']} · "
            f"{row['secs']:.1f}s · {tokens} tok{cost}{why}")


class BenchProgress:
    """One PASS/FAIL/EXCL line per trial on stderr; on a terminal, above a rich table of
    each contestant's tally so far. ``quiet``: one line, rewritten in place on a terminal,
    printed once at the end otherwise. ``maxfail``: after that many failed trials, the
    runner is stopped."""

    def __init__(self, plan: Plan, *, quiet: bool = False, maxfail: int | None = None,
                 total: int | None = None) -> None:
        self.total = len(plan.tasks) * plan.trials
        self.planned = total if total is not None else self.total * len(plan.contestants)
        self.tally = {c.name: {"PASS": 0, "FAIL": 0, "EXCL": 0} for c in plan.contestants}
        self.quiet, self.maxfail, self.runner = quiet, maxfail, None
        self.live = None
        self.tty = sys.stderr.isatty()
        if self.tty and not quiet:
            from orchestrator.security import outlet

            self.live = outlet.live(self, stderr=True, refresh_per_second=4)

    def __call__(self, row: dict[str, Any]) -> None:
        line = trial_line(row)
        self.tally[row["contestant"]][line[:4]] += 1
        if self.quiet:
            if self.tty:  # orch's own line, rewritten in place
                from orchestrator.security.outlet import write_raw

                write_raw("\r" + self.summary(), err=True)
        elif self.live is not None:
            self.live.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)
        failed = sum(t["FAIL"] for t in self.tally.values())
        if self.maxfail and failed >= self.maxfail and self.runner is not None:
            self.runner.stop(f"--maxfail {self.maxfail} reached")

    def summary(self) -> str:
        """The one progress line of -q."""
        done = sum(sum(t.values()) for t in self.tally.values())
        count = {w: sum(t[w] for t in self.tally.values()) for w in ("PASS", "FAIL", "EXCL")}
        return (f"{done}/{self.planned} trials · {count['PASS']} passed · {count['FAIL']} "
                f"failed · {count['EXCL']} excluded")

    def __rich__(self):
        from rich.table import Table

        table = Table("contestant", "done", "pass", "fail", "excluded")
        for name, t in self.tally.items():
            table.add_row(name, f"{sum(t.values())}/{self.total}", str(t["PASS"]),
                          str(t["FAIL"]), str(t["EXCL"]))
        return table

    def __enter__(self):
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()
        if self.quiet:  # the line ends (a terminal) or is said once (a log)
            click.echo("" if self.tty else self.summary(), err=True)


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("orch", "litellm", "numpy", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def choose_sandbox(needed: bool, unsafe: bool) -> str | None:
    """bwrap's path, or None; refuses when it is needed and cannot run (unless ``unsafe``,
    which is said once on stderr)."""
    from orchestrator.bakeoff.guard import UNSAFE_FLAG, choose

    path = choose(needed=needed, unsafe=unsafe)
    if unsafe and needed:
        say(f"{UNSAFE_FLAG}: verify checks and command contestants run without bubblewrap "
            "(a scrubbed environment and resource limits only)", "warning")
    return path


def execute(plan: Plan, resolved, pms, *, yes: bool, out: Path | None, as_json: bool,
            probe: bool = False, unsafe: bool = False, maxfail: int | None = None,
            quiet: bool = False, junit: Path | None = None,
            previous: dict[str, Any] | None = None, again: dict[int, str] | None = None,
            settled: list[dict[str, Any]] = (), guard=None) -> None:
    """Run the plan (or, with ``previous``, the slots ``again`` names, merged into those
    results in ``out`` with the ``settled`` rows of a killed run), save, print."""
    import anyio

    from orchestrator import config as config_mod
    from orchestrator import runtime
    from orchestrator.app.warm import import_litellm_quietly
    from orchestrator.bakeoff import resume
    from orchestrator.bakeoff.run import Runner, exclusions, new_bench_id
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.models.addressing import check_key

    for c in plan.contestants:
        if c.kind != "command":
            for model in _models_of(resolved[c.name]):
                check_key(model)  # before any spend: one line, exit 1
        elif not cmd.found(c):
            raise OrchError(f"contestant {c.name}: {c.command} is not on PATH; install it or "
                            "give its full path (orch bench --check lists every contestant)")
    guard = guard or plan.guard(choose_sandbox(plan.needs_sandbox, unsafe), unsafe=unsafe)
    if junit is not None and junit.is_dir():
        raise UsageProblem(f"--junit-xml {junit} is a directory; pass a file name")
    confirm(plan, resolved, yes)
    bench_id = previous["bench_id"] if previous else new_bench_id()
    path = out or config_mod.home() / "bench" / f"{bench_id}.json"
    if path.exists() and path.is_dir():
        raise UsageProblem(f"--out {path} is a directory; pass a file name")
    guard.secret = (*guard.secret, path.parent)  # the results: past answers and checks' words
    if out is not None and previous is None:  # `orch runs` finds it through this link
        from orchestrator.operations.runs import LINK
        from orchestrator.store import write_text_atomic

        write_text_atomic(config_mod.home() / "bench" / f"{bench_id}{LINK}",
                          str(path.expanduser().resolve()) + "\n")
    if resolved:
        import_litellm_quietly()
    ledger = LedgerSink().preflight()  # a stale ledger schema: one line, before spend
    planned = resume.total(plan)
    progress = BenchProgress(plan, quiet=quiet, maxfail=maxfail,
                             total=len(again) if again is not None else None)
    started = datetime.now(UTC).isoformat()

    def results(rows: list[dict[str, Any]]) -> dict[str, Any]:
        if previous is not None:
            doc = resume.merge(previous, rows, again or {}, settled)
            doc["ledger_errors"] = [*previous.get("ledger_errors", []), *ledger.errors]
            return doc
        return {"bench_id": bench_id, "started": started,
                "finished": datetime.now(UTC).isoformat(), "versions": versions(),
                "model_ids": {n: m.name for n, m in resolved.items()},
                "settings": plan.settings(), "trials": rows, "exclusions": exclusions(rows),
                "ledger_errors": ledger.errors,
                "prompts": {t.id: plan.render(t) for t in plan.tasks}}  # for `bench show`

    def graded(row: dict[str, Any]) -> None:
        """Each trial, once graded, is in the results file at once (marked running, with
        this process): a bench (or a resume) killed with -9 leaves every trial it paid for
        and graded, so `orch bench resume` runs only the rest."""
        progress(row)
        save_partial(path, results([runner.rows[n] for n in sorted(runner.rows)]), run)

    runner = Runner(plan=plan, bench_id=bench_id, config=runtime.config(), pms=pms,
                    resolved=resolved, ledger=ledger, runs_dir=config_mod.runs_dir(),
                    on_trial=graded, guard=guard)
    if previous is not None:  # its own wave folders beside the first run's
        # the bench's account as the record holds it: what every run of it spent, and what
        # a killed one left in flight; the ceiling holds across resumes
        runner.account = resume.account(previous, plan, ledger)
        runner.wanted = set(again or {})
        n = len(previous.get("resumes") or []) + 1
        # a resume killed before it graded a trial left its waves but no entry in the file
        while any(config_mod.runs_dir().glob(f"{bench_id}-r{n}-*")):
            n += 1
        runner.wave_prefix = f"r{n}-"
    # the marker says which waves this run's trials are, written before anything is sent:
    # a run killed even before its first trial was graded leaves a file to resume, and the
    # resume finds what that run was billed for (bakeoff/regrade.py)
    run = {"wave_prefix": runner.wave_prefix,
           "trials": None if runner.wanted is None else sorted(runner.wanted)}
    save_partial(path, results([]), run)
    progress.runner = runner
    with progress:
        rows = anyio.run(partial(runner.run, handle_signals=True))
    doc = results(rows)
    if runner.signum is not None:
        doc["interrupted"] = interrupted(runner.signum, doc["trials"], planned,
                                         runner.stop_reason)
    finish(doc, path, as_json=as_json, probe=probe, junit=junit)


RUNNING = "running"  # a partial results file's marker: the process still writing it


def save_partial(path: Path, doc: dict[str, Any], run: dict[str, Any] | None = None
                 ) -> None:
    """The results so far, atomically, marked with the process that writes them (`orch runs`
    shows the bench running while it lives, interrupted once it is gone). A file that cannot
    be written is said once on stderr; the final write says the rest."""
    import os

    from orchestrator.pids import process_started
    from orchestrator.store import write_json_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {**doc, RUNNING: {
            "pid": os.getpid(), "pid_started": process_started(os.getpid()), **(run or {})}})
    except OSError as exc:
        if path not in _UNWRITABLE:
            _UNWRITABLE.add(path)
            say(f"the partial results {path} cannot be written ({exc.strerror or exc})",
                "warning")


_UNWRITABLE: set[Path] = set()


def resume_bench(file: Path, *, retry_failed: bool, retry_excluded: bool, yes: bool,
                 as_json: bool, unsafe: bool, maxfail: int | None, quiet: bool,
                 junit: Path | None, ceilings: dict[str, float] | None = None,
                 ceiling_keys: tuple[str, ...] = ()) -> None:
    """``orch bench resume``: run what the results file lacks (and, asked, its failed or
    excluded trials again), merged into the same file."""
    from orchestrator.bakeoff import resume

    doc = load_results(file)
    marker = doc.get(RUNNING) or {}
    if marker:
        from orchestrator.pids import same_process

        if same_process(marker.get("pid"), marker.get("pid_started")):
            raise OrchError(f"{file} is still being written by orch bench (pid "
                            f"{marker.get('pid')}); wait for it, or stop it first")
    plan = resume.plan_of(doc, file, ceiling_keys)
    plan.ceilings.update({k: v for k, v in (ceilings or {}).items() if v is not None})
    again = resume.todo(doc, resume.total(plan), failed=retry_failed, excluded=retry_excluded)
    settled, guard = settle_killed(doc, plan, unsafe, quiet)
    again = {n: why for n, why in again.items() if n not in {r["n"] for r in settled}}
    if settled and not again:  # nothing to send: the settled trials are the resume
        finish(resume.merge(doc, [], {}, settled), file, as_json=as_json, junit=junit)
    if not again:
        say(f"nothing to run: every trial of {file} was graded"
            + ("" if retry_failed and retry_excluded else
               " (--retry-failed, --retry-excluded run those again)"))
        sys.exit(0)
    resolved, pms = resolve(plan)
    counts: dict[str, int] = {}
    for why in again.values():
        counts[why] = counts.get(why, 0) + 1
    say(f"resuming {doc['bench_id']}: {len(again)} trial(s) to run ("
        + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")")
    execute(plan, resolved, pms, yes=yes, out=file, as_json=as_json, unsafe=unsafe,
            maxfail=maxfail, quiet=quiet, junit=junit, previous=doc, again=again,
            settled=settled, guard=guard)


def settle_killed(doc: dict[str, Any], plan: Plan, unsafe: bool, quiet: bool
                  ) -> tuple[list[dict[str, Any]], Any]:
    """The trials a killed run was billed for but never graded, settled with no request
    (bakeoff/regrade.py), each said on stderr; and the guard their checks ran under. A
    Ctrl-C meanwhile leaves the results file as it was (nothing was sent)."""
    from orchestrator import config as config_mod
    from orchestrator.bakeoff import regrade, resume

    if regrade.killed_run(doc, resume.total(plan)) is None:  # it finished: nothing unsettled
        return [], None
    guard = plan.guard(choose_sandbox(plan.needs_sandbox, unsafe), unsafe=unsafe)
    try:
        settled = regrade.settle(doc, plan, config_mod.runs_dir(), guard)
    except KeyboardInterrupt:
        guard.running.stop()  # the check it was grading with
        say("interrupted while grading the answers a killed run saved; nothing was sent "
            "and the results file is unchanged", always=True)
        sys.exit(130)
    for row in settled:
        if not quiet or row["excluded"]:
            click.echo(trial_line(row) + (f" · {row['regraded']}" if row.get("regraded")
                                          else ""), err=True)
    return settled, guard


def interrupted(signum: int, rows: list[dict[str, Any]], planned: int,
                reason: str | None = None) -> dict[str, Any]:
    """What a signal (or --maxfail, ``reason``) left: the trials graded before it
    (complete), those it cut short (listed, excluded), and how many never started."""
    import signal

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


def finish(doc: dict[str, Any], path: Path, *, as_json: bool, probe: bool = False,
           junit: Path | None = None) -> None:
    from orchestrator.bakeoff import report
    from orchestrator.store import write_json_atomic

    doc["stats"] = analyse(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    folder = path.with_suffix("")
    md, page = report.write(doc, folder)
    if junit is not None:
        from orchestrator.bakeoff import junit as junit_mod

        try:
            junit_mod.write(doc, junit)
        except OSError as exc:  # the results are saved: say so, and why the XML is not
            raise OrchError(f"--junit-xml {junit} cannot be written ({exc.strerror or exc}); "
                            f"the results are in {path}: `orch bench report` it, or pick "
                            "a writable file") from None
    if as_json:
        from orchestrator.cli.common import print_json

        print_json({**doc, "results_file": str(path), "report_md": str(md),
                    "report_html": str(page)})
    elif probe:
        click.echo(probe_text(doc))
    else:
        click.echo(report.terminal(doc))
    stop = doc.get("interrupted")
    if stop:  # everything measured so far is on disk: say where, in one line
        say(f"{'stopped' if not stop['signal'] else 'interrupted'} ({stop['signal_name']}) "
            f"after {len(stop['complete'])} of {stop['planned']} trials; partial results: "
            f"{path} (report: {md}; `orch bench resume {path}` runs the rest)", always=True)
        sys.exit(1 if not stop["signal"] else 128 + stop["signal"])
    click.echo(f"results: {path}\nreport: {md} · {page}", err=True)
    if probe:  # a probe is a check: every contestant must start and pass the tiny task
        sys.exit(0 if all(r["status"] == "complete" and r["passed"] for r in doc["trials"])
                 else 1)
    sys.exit(2 if doc["exclusions"] else 0)


def probe_text(doc: dict[str, Any]) -> str:
    lines = []
    for row in doc["trials"]:
        started = row["status"] == "complete"
        read = (row["tokens"] or 0) > 0 or row["cost_usd"] is not None
        lines.append(f"{row['contestant']}: {'started' if started else 'did not finish'}"
                     f"; grading {'PASS' if row['passed'] else 'FAIL'}"
                     f" ({row['check_output']}); tokens/cost "
                     f"{'read' if read else 'not read'}"
                     + (f"; {row['excluded'] or row['reason']}" if not started else ""))
    return "\n".join(lines)


def load_results(file: Path) -> dict[str, Any]:
    """A results file, or one line saying why not."""
    from orchestrator.store import read_json

    try:
        doc = read_json(file)
        if not isinstance(doc, dict) or "trials" not in doc or "settings" not in doc:
            raise ValueError("not an orch bench results file")
    except FileNotFoundError:
        raise UsageProblem(f"{file} does not exist; pass a results file from ORCH_HOME/bench/") \
            from None
    except (OSError, ValueError) as exc:
        raise OrchError(f"{file} cannot be read as bench results: {exc}") from None
    return doc


def show(file: Path, task: str | None, contestant: str | None) -> None:
    """``orch bench show``: the trials, a task's trials, or every trial of one task by one
    contestant in full."""
    from orchestrator import config as config_mod
    from orchestrator.bakeoff import browse

    doc = load_results(file)
    tasks = doc["settings"].get("tasks") or sorted({r["task"] for r in doc["trials"]})
    names = [c["name"] for c in doc["settings"].get("contestants") or []]
    if task is not None and task not in tasks:
        raise UsageProblem(f"no task {task!r} in {file}; its tasks: {', '.join(tasks[:20])}")
    if contestant is not None and contestant not in names:
        raise UsageProblem(f"no contestant {contestant!r} in {file}; its contestants: "
                        f"{', '.join(names)}")
    if contestant is None:
        lines = browse.listing(doc, task)
        if task is not None and browse.prompt_of(doc, task) is not None:
            lines = ["-- prompt", browse.prompt_of(doc, task), "-- trials", *lines]
        click.echo("\n".join(lines) or "no trials were run")
        return
    rows = [r for r in doc["trials"] if r["task"] == task and r["contestant"] == contestant]
    if not rows:
        click.echo(f"{contestant} has no trial of {task} in {file} (never started; "
                   f"`orch bench resume {file}` runs it)")
        return
    runs_dir = config_mod.runs_dir()
    click.echo("\n\n".join(browse.trial_text(doc, r, runs_dir) for r in rows))


def rerender(file: Path, *, as_json: bool) -> None:
    from orchestrator.bakeoff import report

    doc = load_results(file)
    doc["stats"] = analyse(doc)
    md, page = report.write(doc, file.with_suffix(""))
    if as_json:
        from orchestrator.cli.common import print_json

        print_json(doc["stats"])
    else:
        click.echo(report.terminal(doc))
    click.echo(f"report: {md} · {page}", err=True)
