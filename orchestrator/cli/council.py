"""``orch council``: multi-model review (run, stats) and the saved model lists it runs on.

Councils are stored as the names the user typed, not resolved models, so changing an alias or
a provider changes every council that uses it.
"""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli.config_cmds import check_name, echo_json
from orchestrator.cli.daemon_option import no_daemon_option
from orchestrator.cli.params import FiniteFloat
from orchestrator.cli.plugin_options import PluginOptionsCommand
from orchestrator.config import Config
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.models.addressing import parse_model_list, resolve


@click.group()
def council() -> None:
    """Multi-model review, and saved model lists ("councils") to run it on.

    `orch council run` seats several models as reviewers: each reviews, they judge each
    other's findings anonymously, a deterministic tally sorts findings by peer concurrence,
    and a chair that sat on no seat writes the verdict. `orch council stats` shows each
    model's track record. A saved council is a named list of two or more models, usable as
    `--council NAME` here and in `orch fanout`. See docs/council.md.

    \b
    Examples:
      orch council save reviewers --models myvllm/qwen3-8b,openai/gpt-4o-mini,fast@hot
      orch council run --council reviewers --chair anthropic/claude-sonnet-4-5 \\
                       --prompt-file review.md --diff main..HEAD
      orch council stats
    """


@council.command("save")
@click.argument("name")
@click.option("--models", "models_text", required=True, metavar="A,B,C",
              help="Comma-separated model names or aliases (at least two).")
def council_save(name: str, models_text: str) -> None:
    """Save (or replace) the council NAME as a list of models.

    Every model must resolve now (known alias or PROVIDER/MODEL, known @variant); to put
    one model in twice, give each copy a different variant.

    \b
    Examples:
      orch council save review --models myvllm/qwen3-8b,openai/gpt-4o-mini
      orch council save spread --models fast@cold,fast@hot,anthropic/claude-3-5-haiku-latest
    """
    check_name("council", name)
    models = parse_model_list(models_text)
    if len(models) < 2:
        raise UsageProblem(f"a council needs at least 2 models, got {len(models)}; "
                        "pass --models a,b[,c...]")
    config = Config.load()
    resolved = []
    for spec in models:
        try:
            resolved.append(resolve(spec, config).name)
        except OrchError as exc:
            raise UsageProblem(f"council {name}: {exc}") from None
    # compared after aliases expand: `fast` and the model it names would sit on two seats
    dupes = sorted({m for m in resolved if resolved.count(m) > 1})
    if dupes:
        raise UsageProblem(f"{', '.join(dupes)} listed twice; to run a model twice give each copy "
                        "a variant (e.g. MODEL@hot,MODEL@cold)")
    old = config.councils.get(name)
    config.councils[name] = models
    config.save()
    verb = "replaced council" if old is not None else "saved council"
    click.echo(f"{verb} {name}: {', '.join(models)}")


@council.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def council_list(as_json: bool) -> None:
    """List saved councils and their models.

    \b
    Example:
      orch council list
      orch council list --json
    """
    councils = Config.load().councils
    if as_json:
        echo_json([{"name": n, "models": list(councils[n])} for n in sorted(councils)])
        return
    if not councils:
        click.echo("no councils; save one with `orch council save NAME --models a,b`")
        return
    width = max(len(n) for n in councils)
    for n in sorted(councils):
        click.echo(f"{n:<{width}}  {', '.join(councils[n])}")


@council.command("remove")
@click.argument("name")
def council_remove(name: str) -> None:
    """Delete the saved council NAME (the models themselves are untouched).

    \b
    Example:
      orch council remove review
    """
    config = Config.load()
    config.remove("councils", name, "council", "saved")
    click.echo(f"removed council {name}")


@council.command("run", cls=PluginOptionsCommand, plugin_command="council_run")
@click.option("--prompt", "-p", help="The review briefing text.")
@click.option("--prompt-file", "-f", metavar="FILE", help="Read the briefing from FILE ('-' = stdin).")
@click.option("--diff", "diff", metavar="REV_RANGE",
              help="Add `git diff REV_RANGE` (run here) to the briefing, e.g. main..HEAD.")
@click.option("--context", "-c", "context", multiple=True, metavar="PATH",
              help="A file added to the briefing (repeatable); read once, shared by all seats.")
@click.option("--models", "-m", metavar="A,B,C", help="The seats: two or more models.")
@click.option("--council", "council_name", metavar="NAME", help="Seat a saved council.")
@click.option("--chair", metavar="MODEL",
              help="Writes the verdict; must not be a seat (default: defaults.chair in config).")
@click.option("--timeout", "timeout_min", type=FiniteFloat(0, min_open=True, max=7 * 24 * 60),
              default=None,  # None: the default (Common.limits)
              metavar="MINUTES",
              help="Per-call time limit (each seat, judge and chair leg).  [default: 10]")
@click.option("--max-steps", type=click.IntRange(1, 200), default=None,
              help="Requests one leg may make (tool rounds).  [default: 20]")
@click.option("--tools", "tools_mode", type=click.Choice(["none", "read"]), default="read",
              show_default=True, help="Tools seats and judges may call (read: read-only "
              "workspace tools, so seats can read the code under review).")
@click.option("--workspace", metavar="DIR",
              help="The directory the workspace tools may read (default: the git work tree "
                   "you are in; outside one, tools are off).")
@click.option("--workspace-any", is_flag=True,
              help="Allow --workspace to be your home directory or /.")
@click.option("--tag", help="A label stored on every spend ledger row of the run.")
@click.option("--no-plugins", is_flag=True, help="A bare run: load no plugins at all.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where council-<run_id>/ goes (default ORCH_HOME/runs).")
@click.option("--json", "as_json", is_flag=True, help="Print run.json on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--no-validate-models", "no_validate", is_flag=True,
              help="Send model names as given, even ones the provider's list does not have.")
@no_daemon_option
def council_run(prompt, prompt_file, diff, context, models, council_name, chair, timeout_min,
                max_steps, tools_mode, workspace, workspace_any, tag, no_plugins, runs_dir, as_json, quiet,
                no_validate, no_daemon, budgets):
    """Review a change with a council: seats review, judge each other anonymously, a tally,
    and a chair's verdict (ship | fix-first | rethink).

    Everything is checked before any spend: at least 2 seats, a chair that is not a seat,
    every model resolving with its key set, the diff and context files readable. Artifacts
    go to RUNS_DIR/council-<run_id>/ (report.md, report.html, tally.json, verdict.json,
    run.json, ...). A cost ceiling (the cost_ceiling plugin's option) bounds the whole run:
    each stage may spend what earlier stages left. Exit code: 0 complete with a verdict, 2 degraded (a seat lost, judges
    short, no verdict, a budget stopped work or cost inexact under a ceiling), 1 pre-flight
    failure or COUNCIL_QUORUM (fewer than 2 reviews), 130/143 interrupted (run.json is still
    written).

    \b
    Examples:
      orch council run -f review.md --diff main..HEAD -m a,b,c --chair d
      orch council run -f review.md --council reviewers --chair d --json > result.json
    """
    import sys

    from orchestrator import runtime
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Council
    from orchestrator.briefing import prompt_source_name, read_prompt
    from orchestrator.cli.common import print_json
    from orchestrator.cli.running import Renderer, run
    from orchestrator.council.display import print_run, say_run
    from orchestrator.notices import say

    if quiet:
        runtime.quiet()  # -q: only errors on stderr, rate_limit_hold warnings included
    request = Council(
        prompt=read_prompt(prompt, prompt_file), prompt_source=prompt_source_name(
            prompt, prompt_file), diff=diff, context=tuple(context), models=models,
        council=council_name, chair=chair, timeout_min=timeout_min, max_steps=max_steps,
        tools=tools_mode, workspace=workspace, workspace_any=workspace_any, tag=tag,
        no_plugins=no_plugins, runs_dir=str(runs_dir) if runs_dir else None,
        budgets=dict(budgets), validate_models=not no_validate, quiet=quiet)
    prepared = click.get_current_context().with_resource(prepare(request))
    doc, code, extra = run(prepared, renderer=Renderer(quiet=quiet or as_json),
                           no_daemon=no_daemon)
    if as_json:
        print_json(doc)
    else:
        print_run(doc, extra.get("tally"), extra.get("synthesis"))
    say_run(doc)
    if doc["error"]:
        say(doc["error"], "error")
    sys.exit(code)


@council.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
@click.option("--judges", is_flag=True,
              help="Judge calibration instead: each judge's agreement with the others "
                   "(Krippendorff's alpha), its position bias and its agreement with the "
                   "final tier, with 95% intervals.")
def council_stats(as_json: bool, judges: bool) -> None:
    """Each model's track record across council runs: findings raised, how many peers
    confirmed, street-cred (mean rank from peers, 1 = best), conforming findings blocks,
    verdicts given as chair. Read from the council table of the spend ledger database.
    With --judges, how far each judge's votes can be trusted, from the votes it cast.

    \b
    Examples:
      orch council stats
      orch council stats --json
      orch council stats --judges
    """
    from orchestrator.council.display import print_judges, print_stats
    from orchestrator.ledger.council_rows import CouncilLedger

    if judges:
        from orchestrator.council.calibration import judges as calibrate

        doc = calibrate(CouncilLedger().votes())
        if as_json:
            echo_json(doc)
        else:
            print_judges(doc)
        return
    stats = CouncilLedger().stats()
    if as_json:
        echo_json(stats)
    else:
        print_stats(stats)
