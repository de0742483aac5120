"""What ``orch bench`` prints: the contestants found (``--check``), the plan (``--dry-run``),
the estimate and its confirmation, each trial as it is graded, and the results at the end.
The bench itself is prepared and run by the application (app/bench.py, app/bench_run.py).
Imported only when a bench command runs (never on ``orch --help``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.app.bench import load_results, models_of
from orchestrator.app.bench_run import analyse, trial_line
from orchestrator.bakeoff import contestants as cmd
from orchestrator.bakeoff.plan import Plan, describe_estimate, estimate
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.notices import say


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
                for model in models_of(resolved[c.name]):
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


def confirm(prepared, yes: bool) -> None:
    """Show the estimate; ask on a terminal; without one, --yes or a run ceiling (the
    cost_ceiling plugin's) is required."""
    plan = prepared.plan.plan
    click.echo(describe_estimate(prepared.plan.estimate), err=True)
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


class BenchProgress:
    """One PASS/FAIL/EXCL line per trial on stderr; on a terminal, above a rich table of
    each contestant's tally so far. ``quiet``: one line, rewritten in place on a terminal,
    printed once at the end otherwise. (``--maxfail`` is the run's: app/bench_run.py.)"""

    def __init__(self, plan: Plan, *, quiet: bool = False, total: int | None = None) -> None:
        self.total = len(plan.tasks) * plan.trials
        self.planned = total if total is not None else self.total * len(plan.contestants)
        self.tally = {c.name: {"PASS": 0, "FAIL": 0, "EXCL": 0} for c in plan.contestants}
        self.quiet = quiet
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

    def settled(self, row: dict[str, Any]) -> None:
        """A trial a killed run was billed for, settled before this run sent anything."""
        if not self.quiet or row["excluded"]:
            click.echo(trial_line(row) + (f" · {row['regraded']}" if row.get("regraded")
                                          else ""), err=True)

    def trial(self, row: dict[str, Any]) -> None:
        if row.get("settled"):
            self.settled(row)
        else:
            self(row)

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


def run(prepared, *, yes: bool, as_json: bool, quiet: bool, no_daemon: bool = False) -> None:
    """Confirm the estimate, run the bench with a line per trial, print the results."""
    from orchestrator.cli.running import Renderer
    from orchestrator.cli.running import run as run_prepared

    if prepared.nothing is not None:
        say(prepared.nothing)
        sys.exit(0)
    bench = prepared.plan
    confirm(prepared, yes)
    progress = BenchProgress(bench.plan, quiet=quiet,
                             total=len(bench.again) if bench.again is not None else None)
    doc, code, where = run_prepared(prepared, renderer=Renderer(
        quiet=quiet, display=progress, trials=progress.trial), no_daemon=no_daemon)
    if where.get("nothing"):
        say(where["nothing"])
        sys.exit(0)
    results(doc, where, as_json=as_json)
    sys.exit(code)


def results(doc: dict[str, Any], where: dict[str, Any], *, as_json: bool) -> None:
    """The results at the end: JSON, the probe's lines, or the tables; where they are."""
    from orchestrator.bakeoff import report

    path, md, page = where["results_file"], where["report_md"], where["report_html"]
    if as_json:
        from orchestrator.cli.common import print_json

        print_json({**doc, "results_file": path, "report_md": md, "report_html": page})
    elif where.get("probe"):
        click.echo(probe_text(doc))
    else:
        click.echo(report.terminal(doc))
    stop = doc.get("interrupted")
    if stop:  # everything measured so far is on disk: say where, in one line
        say(f"{'stopped' if not stop['signal'] else 'interrupted'} ({stop['signal_name']}) "
            f"after {len(stop['complete'])} of {stop['planned']} trials; partial results: "
            f"{path} (report: {md}; `orch bench resume {path}` runs the rest)", always=True)
        return
    click.echo(f"results: {path}\nreport: {md} · {page}", err=True)


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
