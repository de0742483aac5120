"""``orch bench``: a bake-off of models and agent CLIs on tasks with hidden checks."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.daemon_option import no_daemon_option
from orchestrator.cli.params import FiniteFloat
from orchestrator.cli.plugin_options import PluginOptionsCommand, PluginOptionsGroup
from orchestrator.errors import UsageProblem


@click.group(cls=PluginOptionsGroup, plugin_command="bench", invoke_without_command=True)
@click.option("--init", "init", is_flag=True, help="Write a starter bench.toml (never overwrites).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), metavar="FILE",
              help="The bench file (contestants, tasks, settings).")
@click.option("--builtin", metavar="NAME", help="A built-in suite: reading, format, adversarial, review.")
@click.option("--cases", type=click.Path(path_type=Path), metavar="DIR",
              help="A folder of TOML/JSON task files.")
@click.option("--only", metavar="a,b", help="Only these task ids.")
@click.option("--models", "-m", metavar="a,b,c",
              help="Model contestants, no config file needed; the first is the baseline.")
@click.option("--trials", type=click.IntRange(1, 1000), help="Trials per task and contestant (3).")
@click.option("--jobs", type=click.IntRange(1, 1024), help="Model trials at once (8).")
@click.option("--timeout", "timeout_s", type=FiniteFloat(0, min_open=True), metavar="S",
              help="Per-trial time limit in seconds (600).")
@click.option("--selftest", is_flag=True,
              help="Grade every task's solution (must pass) and an empty answer (must fail).")
@click.option("--dry-run", is_flag=True, help="The plan, the first prompt and the estimate; no spend.")
@click.option("--check", is_flag=True, help="Is every contestant there? No model is called.")
@click.option("--probe", is_flag=True, help="One tiny task per contestant: starts, grades, reads cost.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before spending.")
@click.option("--out", type=click.Path(path_type=Path), metavar="FILE",
              help="Where the results go (default ORCH_HOME/bench/<id>.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the results document as JSON.")
@click.option("--unsafe-checks", is_flag=True,
              help="Run verify checks and command contestants without bubblewrap (a scrubbed "
                   "environment and resource limits only).")
@click.option("--maxfail", type=click.IntRange(1), metavar="N",
              help="Stop after N failed trials (graded so far are kept; exit 1).")
@click.option("--quiet", "-q", is_flag=True, help="One progress line instead of one per trial.")
@click.option("--junit-xml", "junit_xml", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write the trials as JUnit XML (for CI).")
@no_daemon_option
@click.pass_context
def bench(ctx, init, config_path, builtin, cases, only, models, trials, jobs, timeout_s,
          selftest, dry_run, check, probe, yes, out, as_json, unsafe_checks,
          maxfail, quiet, junit_xml, no_daemon, budgets):
    """Run tasks through several contestants and report pass rates with honest intervals.

    Each trial runs in a fresh folder and is graded by a hidden check. The first contestant
    is the baseline; the report says better / worse / inconclusive with Holm-adjusted
    sign tests and paired intervals. Exit 0, or 2 when trials were excluded (1 when
    --maxfail stopped it).

    \b
    Examples:
      orch bench --init && orch bench --config bench.toml --dry-run
      orch bench --builtin reading --models openai/gpt-4o-mini,myvllm/qwen3-8b --yes
      orch bench --selftest --cases my-tasks
      orch bench report ~/.config/orch/bench/bench-20261130-101500-ab12.json
      orch bench show RESULTS.json TASK CONTESTANT   # one trial in full
      orch bench resume RESULTS.json --retry-failed  # after Ctrl-C or --maxfail
    """
    if ctx.invoked_subcommand is not None:
        return
    if init:
        sys.exit(_init(config_path or Path("bench.toml")))
    if selftest:
        sys.exit(_selftest(config_path, builtin, cases, as_json, unsafe_checks))
    from orchestrator.app.requests import Bench

    request = Bench(config_path=str(config_path) if config_path else None, builtin=builtin,
                    cases=str(cases) if cases else None, only=only,
                    models=tuple(models.split(",")) if models else None, trials=trials,
                    jobs=jobs, timeout_s=timeout_s, probe=probe,
                    out=str(out) if out else None, unsafe_checks=unsafe_checks,
                    maxfail=maxfail, junit_xml=str(junit_xml) if junit_xml else None,
                    ceilings=dict(budgets), quiet=quiet)
    if check or dry_run:  # no spend: the plan and each contestant, here
        from orchestrator.app.bench import build_plan, resolve
        from orchestrator.cli.bench_run import check_contestants, dry_run_text

        plan = build_plan(request)
        resolved, _ = resolve(plan)
        if check:
            sys.exit(check_contestants(plan, resolved, unsafe_checks))
        click.echo(dry_run_text(plan, resolved))
        sys.exit(0)
    from orchestrator.app.prepare import prepare
    from orchestrator.cli import bench_run

    bench_run.run(ctx.with_resource(prepare(request)), yes=yes, as_json=as_json, quiet=quiet,
                  no_daemon=no_daemon)


@bench.command("report")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
def report_cmd(file, as_json):
    """Re-render a saved bench: the tables, report.md and report.html."""
    from orchestrator.cli.bench_run import rerender

    rerender(file, as_json=as_json)


@bench.command("resume", cls=PluginOptionsCommand, plugin_command="bench")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--retry-failed", is_flag=True, help="Also run the failed trials again.")
@click.option("--retry-excluded", is_flag=True,
              help="Also run the excluded trials again (those billed before a kill too).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before spending.")
@click.option("--maxfail", type=click.IntRange(1), metavar="N",
              help="Stop after N failed trials.")
@click.option("--quiet", "-q", is_flag=True, help="One progress line.")
@click.option("--junit-xml", "junit_xml", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write all the trials as JUnit XML.")
@click.option("--json", "as_json", is_flag=True, help="Print the results document as JSON.")
@click.option("--unsafe-checks", is_flag=True,
              help="Run verify checks and command contestants without bubblewrap.")
@no_daemon_option
def resume_cmd(file, retry_failed, retry_excluded, yes, maxfail, quiet, junit_xml,
               as_json, unsafe_checks, no_daemon, budgets):
    """Run the trials an interrupted bench did not run (or cut short), merged into its
    results file; with --retry-failed / --retry-excluded, those trials again too (the
    report says so). A trial billed before a kill but never graded is graded from its
    saved answer, never sent again unless --retry-excluded asks on a later resume."""
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import BenchResume
    from orchestrator.cli import bench_run

    context = click.get_current_context()
    parent = context.parent  # `orch bench --unsafe-checks resume F`
    unsafe_checks = unsafe_checks or bool(parent and parent.params.get("unsafe_checks"))
    request = BenchResume(file=str(file), retry_failed=retry_failed,
                          retry_excluded=retry_excluded, unsafe_checks=unsafe_checks,
                          maxfail=maxfail, junit_xml=str(junit_xml) if junit_xml else None,
                          ceilings=dict(budgets), quiet=quiet)
    bench_run.run(context.with_resource(prepare(request)), yes=yes, as_json=as_json,
                  quiet=quiet, no_daemon=no_daemon)


@bench.command("show")
@click.argument("file", type=click.Path(path_type=Path))
@click.argument("task", required=False)
@click.argument("contestant", required=False)
def show_cmd(file, task, contestant):
    """Read a finished bench's trials: all of them; one TASK's; or, with CONTESTANT, each of
    its trials in full (prompt, answer, steps, output, check output)."""
    from orchestrator.cli.bench_run import show

    show(file, task, contestant)


def _init(path: Path) -> int:
    from orchestrator.bakeoff.plan import STARTER

    if path.exists():
        raise UsageProblem(f"{path} already exists; edit it, or pass --config OTHER.toml with "
                        "--init to write a new one")
    path.write_text(STARTER, encoding="utf-8")
    click.echo(f"wrote {path}; next: orch bench --config {path} --dry-run")
    return 0


def _selftest(config_path, builtin, cases, as_json, unsafe) -> int:
    from orchestrator.app.bench import ceiling_keys, choose_sandbox
    from orchestrator.bakeoff import plan as plan_mod
    from orchestrator.bakeoff import tasks as tasks_mod
    from orchestrator.bakeoff.guard import Guard

    if builtin or cases or config_path:
        folders = [plan_mod.task_folder(config_path, builtin, cases)]
    else:  # no suite named: every built-in one
        folders = [(f"builtin:{n}", tasks_mod.suite_dir(n)) for n in tasks_mod.builtin_suites()]
    loaded = [(label, tasks_mod.load_tasks(folder)) for label, folder in folders]
    bench = plan_mod.read_config(config_path).get("bench", {}) if config_path else {}
    path, notice = choose_sandbox(any(t.verify for _, ts in loaded for t in ts), unsafe)
    if notice:
        from orchestrator.notices import say

        say(notice, "warning")
    guard = Guard.of(path, plan_mod.check_settings(bench if isinstance(bench, dict) else {},
                                                   ceiling_keys()))
    rows = []
    for label, tasks in loaded:
        rows += [{"suite": label, **r} for r in tasks_mod.selftest(tasks, guard)]
    bad = [r for r in rows if not r["ok"]]
    if as_json:
        from orchestrator.cli.common import print_json

        print_json({"ok": not bad, "tasks": rows})
    else:
        for r in rows:
            click.echo(f"{'ok  ' if r['ok'] else 'BAD '} {r['suite']} {r['task']}"
                       + (f": {r['problem']} ({r['solution_output'] if not r['solution'] else r['empty_output']})"
                          if not r["ok"] else ""))
        click.echo(f"{len(rows) - len(bad)}/{len(rows)} checks pass their solution and fail "
                   "an empty answer")
    return 1 if bad else 0
