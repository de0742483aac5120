"""``orch fanout``: one briefing, N models at once, every leg in the spend ledger."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator import config as config_mod
from orchestrator.app.model_choice import choose_models
from orchestrator.app.warm import import_litellm_meanwhile
from orchestrator.app.wave import DEFAULT_MAX_LEGS, MAX_TIMEOUT_MIN, prepare_wave
from orchestrator.briefing import (
    compose,
    positional_prompt,
    prompt_source_name,
    read_context,
    read_prompt,
)
from orchestrator.cli.common import print_json
from orchestrator.cli.daemon_option import no_daemon_option
from orchestrator.cli.params import FiniteFloat
from orchestrator.cli.plugin_options import PluginOptionsCommand
from orchestrator.errors import OrchError


@click.command(cls=PluginOptionsCommand, plugin_command="fanout")
@click.option("--models", "-m", help="Comma-separated models, e.g. openai/gpt-4o-mini,myvllm/qwen3-8b.")
@click.option("--council", "council", metavar="NAME", help="Use a saved model list (orch council save).")
@click.option("--prompt", "-p", help="The briefing text.")
@click.option("--prompt-file", "-f", metavar="FILE", help="Read the briefing from FILE ('-' = stdin).")
@click.option("--context", "-c", "context", multiple=True, metavar="PATH",
              help="A file added to the briefing (repeatable); read once, shared by all legs.")
@click.option("--chair", metavar="MODEL", help="After the legs, this model writes one synthesis.")
@click.option("--synthesis", type=click.Choice(["plain", "structured"]), default=None,
              help="The chair's synthesis: plain prose (default), or structured: consensus, "
                   "disagreements with who holds each side, points one answer raised, and a "
                   "resolution, over anonymous labels.")
@click.option("--aggregate", type=click.Choice(["vote"]), default=None,
              help="Also count the final answers: vote = the majority over normalised "
                   "answers (ties and no majority said).")
@click.option("--rounds", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Deliberate: from round 2 each leg reads its peers' answers, anonymised, "
                   "revises or keeps, and votes (docs/deliberation.md).")
@click.option("--peers", type=click.IntRange(1), metavar="K",
              help="With --rounds: each leg reads K peers a round (default: all for up to 5 "
                   "legs, else 4).")
@click.option("--timeout", "timeout_min", type=FiniteFloat(0, min_open=True, max=MAX_TIMEOUT_MIN),
              default=10.0, show_default=True,
              metavar="MINUTES", help="Per-leg time limit.")
@click.option("--max-steps", type=click.IntRange(1, 200), default=20, show_default=True,
              help="Requests one leg may make (tool rounds); the last one asks for the answer.")
@click.option("--tools", "tools_mode", type=click.Choice(["none", "read"]), default=None,
              help="Tools legs may call: read (default: read-only workspace tools) or none.")
@click.option("--workspace", metavar="DIR",
              help="The directory the workspace tools may read (default: the git work tree "
                   "you are in; outside one, tools are off).")
@click.option("--workspace-any", is_flag=True,
              help="Allow --workspace to be your home directory or /.")
@click.option("--max-legs", type=click.IntRange(1, 256), default=DEFAULT_MAX_LEGS, show_default=True,
              help="Refuse waves with more legs than this.")
@click.option("--tag", help="A label stored on every ledger row (see orch spend --group-by tag).")
@click.option("--retry-failed", metavar="WAVE_ID", help="Re-run only that wave's failed legs.")
@click.option("--no-plugins", is_flag=True, help="A bare run: load no plugins at all.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where wave and leg directories go (default ORCH_HOME/runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the wave document as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--no-validate-models", "no_validate", is_flag=True,
              help="Send model names as given, even ones the provider's list does not have.")
@no_daemon_option
@click.argument("words", nargs=-1, metavar="[PROMPT]")
def fanout(models, council, prompt, prompt_file, context, chair, synthesis, aggregate, rounds,
           peers, timeout_min,
           max_steps,
           tools_mode, workspace, workspace_any, max_legs, tag, retry_failed, no_plugins, runs_dir, as_json, quiet,
           no_validate, budgets, words):
    """Run one briefing on several models at once and print every answer.

    All legs run concurrently on one shared server; each leg's tokens and dollars go to the
    spend ledger (orch spend), its files to RUNS_DIR/<wave_id>-<n>/. Exit code: 0 all legs
    complete, 2 partial, 1 none complete, 130/143 interrupted.

    PROMPT, the briefing, may be given as the one argument instead of --prompt.

    \b
    Examples:
      orch fanout -m openai/gpt-4o-mini,myvllm/qwen3-8b "Why does this test flake?" \\
                  -c tests/test_x.py
      git diff | orch fanout --council reviewers --chair anthropic/claude-sonnet-4-5
      orch fanout --retry-failed 20261130-101500-ab12
    """
    from orchestrator import runtime
    from orchestrator.engine.ledger_sink import LedgerSink

    if quiet:
        runtime.quiet()  # -q: only errors on stderr, rate_limit_hold warnings included
    prompt = positional_prompt(words, prompt, prompt_file)
    if rounds > 1 and retry_failed:
        raise click.UsageError("--retry-failed re-runs one round of legs; drop --rounds")
    if peers is not None and rounds == 1:
        raise click.UsageError("--peers only applies to a deliberation; add --rounds N (N ≥ 2)")
    cfg = runtime.config()
    runs = runs_dir or config_mod.runs_dir()
    retry_of, retry_options, prior, chair_only_if_new, kept_from = None, {}, [], False, {}
    account = None  # a retry spends through its family's account (engine/retry.py)
    if retry_failed:
        from orchestrator.engine.retry import plan_retry

        given = [flag for flag, value in (("--models", models), ("--council", council),
                                          ("--prompt", prompt), ("--prompt-file", prompt_file),
                                          ("--context", context)) if value]
        if given:
            raise click.UsageError(f"--retry-failed re-runs that wave's own models and "
                                   f"briefing; drop {', '.join(given)}")

        from orchestrator.engine.family_claim import claim_family
        from orchestrator.engine.rebuild import resolve_wave_id
        from orchestrator.engine.retry import family_root

        retry_failed = resolve_wave_id(runs, retry_failed)  # a unique prefix names the id
        # One retry of a family at a time, held until this command ends: each plans from
        # what the one before it paid.
        click.get_current_context().with_resource(
            claim_family(runs, family_root(runs, retry_failed)))
        # what the plugins declare, loaded or not: a budget kept from the wave whose plugin
        # is now off is refused, never dropped (budget_guards.py)
        from orchestrator.budget_guards import declarations

        declared = [o for _, o in declarations(
            runtime.plugin_manager(enabled=not no_plugins), cfg, no_plugins=no_plugins)]
        plan = plan_retry(runs, retry_failed, chair_model=chair,
                          ceilings=[o for o in declared
                                    if o.run_ceiling and o.key not in budgets])
        old = plan.wave
        # A leg completed in any member of the family (its files, the ledger, the outbox)
        # is never sent (or paid) again.
        if plan.empty:
            also = f" in its family of {len(plan.family)} waves" if len(plan.family) > 1 \
                else ""
            click.echo(f"wave {retry_failed} has no failed legs{also}: nothing to retry",
                       err=True)
            sys.exit(0)
        specs = plan.models
        try:
            briefing = (runs / retry_failed / "briefing.md").read_text(encoding="utf-8")
        except OSError as exc:
            raise OrchError(f"cannot read the briefing of wave {retry_failed} "
                            f"({exc.strerror or exc}); run the wave anew") from None
        prompt_source = f"{retry_failed}/briefing.md"
        retry_of = retry_failed
        tag = tag or old.get("tag")
        chair = plan.chair_model if plan.chair else None
        chair_only_if_new = plan.chair_only_if_new
        retry_options["retry_slots"] = plan.slots
        tools_asked = tools_mode is not None or (old.get("options") or {}).get(
            "tools_asked", True)
        tools_mode = tools_mode or (old.get("options") or {}).get("tools")
        aggregate = aggregate or (old.get("options") or {}).get("aggregate")
        synthesis = synthesis or (old.get("options") or {}).get("synthesis")
        workspace = workspace or (old.get("options") or {}).get("workspace")
        keys = {o.key for o in declared}
        kept = {k: v for k, v in (old.get("options") or {}).items()
                if k in keys and k not in budgets}
        kept_from = dict.fromkeys(kept, retry_failed)
        budgets = {**kept, **budgets}  # a retry keeps its wave's budgets unless overridden
        for key, family in plan.ceilings.items():  # the family's, less what it spent
            budgets[key] = family["left"]
            retry_options[f"{key}_family"] = family
            kept_from[key] = family["root"]
        prior = plan.prior
        account = plan.account
        from orchestrator.notices import say

        for note in plan.notices:  # e.g. requests in flight at a kill: said before spending
            say(note)
    else:
        specs = choose_models(models, council, cfg,
                              runtime.plugin_manager(enabled=not no_plugins))
        briefing = compose(read_prompt(prompt, prompt_file), read_context(context))
        prompt_source = prompt_source_name(prompt, prompt_file)
        tools_asked = tools_mode is not None  # the default --tools is no request for them
    spec, pm = prepare_wave(specs, briefing, prompt_source, cfg=cfg, runs=runs, chair=chair,
                            timeout_min=timeout_min, max_steps=max_steps, tools_mode=tools_mode,
                            workspace=workspace, workspace_any=workspace_any,
                            max_legs=max_legs, tag=tag, no_plugins=no_plugins, budgets=budgets,
                            retry_of=retry_of, prior=prior, retry_options=retry_options,
                            kept_from=kept_from, validate_models=not no_validate, quiet=quiet,
                            tools_asked=tools_asked, aggregate=aggregate, synthesis=synthesis,
                            rounds=rounds)
    spec.chair_only_if_new = chair_only_if_new
    if rounds > 1:  # a deliberation: orchestrator/deliberation
        from orchestrator.deliberation.command import deliberate, print_outcome

        import_litellm_meanwhile()  # meanwhile the wave starts: its first lines said
        doc = deliberate(spec, pm, cfg, LedgerSink().preflight(), rounds=rounds, peers=peers,
                         quiet=quiet or as_json)
    else:
        doc = run_wave(spec, pm, cfg, LedgerSink().preflight(), quiet=quiet or as_json,
                       account=account)
    if as_json:
        print_json(doc)
    else:
        print_human(doc)
        if rounds > 1:
            print_outcome(doc)
        from orchestrator.chair.lines import synthesis_lines
        from orchestrator.votes.lines import vote_lines

        for line in [*synthesis_lines(doc.get("synthesis")), *vote_lines(doc.get("aggregate"))]:
            click.echo(line)
    say_run(doc)
    sys.exit(doc["exit_code"])


def run_wave(spec, pm, cfg, ledger, *, quiet: bool, account=None) -> dict:
    """Run a wave with progress and signal handling; return its document. ``account``: the
    run's (a retry's family's), else the wave's own."""
    import anyio

    from orchestrator.engine.wave import Wave
    from orchestrator.progress import make_progress

    import_litellm_meanwhile()  # meanwhile the wave starts: its first lines said
    progress = make_progress(quiet)
    wave = Wave(spec, pm=pm, config=cfg, ledger=ledger, observe=progress, account=account)

    async def main():
        with progress:
            return await wave.run(handle_signals=True)

    return anyio.run(main)


def _money(value) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _estimated(doc: dict) -> str:
    """A provider reported no usage for some answer: the counts shown are estimates."""
    return " (estimated)" if doc.get("usage_estimated") else ""


def answer_groups(doc: dict) -> list[list[dict]]:
    """The legs (then the chair) in order, those holding the same answer together where the
    run compares answers (a deliberation, a vote): such an answer is printed once."""
    legs = [*doc["legs"]]
    groups: list[list[dict]] = []
    if doc.get("kind") == "deliberation" or doc.get("aggregate"):
        from orchestrator.votes.answer import digest

        by: dict[str, list[dict]] = {}
        for leg in legs:
            if leg.get("status") == "complete" and (leg.get("answer") or "").strip():
                key = digest(leg["answer"])
                if key in by:
                    by[key].append(leg)
                    continue
                by[key] = [leg]
                groups.append(by[key])
            else:
                groups.append([leg])
    else:
        groups = [[leg] for leg in legs]
    return groups + ([[doc["chair"]]] if doc.get("chair") else [])


def _leg_head(leg: dict) -> None:
    u = leg["usage"]
    title = "chair: " if leg.get("kind") == "chair" else ""
    click.echo(f"== {title}{leg['model']} ({leg['leg_id']}) · {leg['status']} · "
               f"{u['input_tokens']}+{u['output_tokens']} tok{_estimated(leg)} · "
               f"{_money(leg['cost_usd'])} · {leg['duration_s']:.1f}s")
    if leg.get("reason"):
        click.echo(f"Reason: {leg['reason']}")


def print_human(doc: dict) -> None:
    """The answers on stdout (what the run says about itself: :func:`say_run`)."""
    from orchestrator.security.secrets import scrub_doc

    doc = scrub_doc(doc)  # answers and reasons are free text: key shapes masked too
    for group in answer_groups(doc):
        shared = len(group) > 1
        for leg in group:
            _leg_head(leg)
            if leg.get("answer") and not shared:
                click.echo(leg["answer"].rstrip())
            if not shared:
                click.echo("")
        if shared:  # one answer held by several legs: printed once, with their names
            click.echo(f"The answer of {', '.join(leg['model'] for leg in group)} "
                       f"({len(group)} legs, the same answer):")
            click.echo(group[0]["answer"].rstrip())
            click.echo("")


def say_run(doc: dict) -> None:
    """What the run says about itself, as ``orch:`` lines on stderr, with or without
    ``--json``: each leg's notes, the wave's notices, what degraded it, its totals and
    files."""
    from orchestrator.notices import say
    from orchestrator.security.secrets import scrub_doc

    doc = scrub_doc(doc)
    legs = [*doc["legs"], *([doc["chair"]] if doc.get("chair") else []),
            *([doc["chair_repair"]] if doc.get("chair_repair") else [])]
    for leg in legs:
        title = "chair " if leg.get("kind") == "chair" else ""
        for note in leg.get("notes") or []:
            say(f"{title}{leg['model']} ({leg['leg_id']}): {note}")
    for notice in doc.get("notices") or []:
        say(notice)
    for reason in doc.get("degraded") or []:  # budgets stopped work: exit 2 (docs/budgets.md)
        say(f"degraded: {reason}", "warning")
    say(wave_totals(doc))


def wave_totals(doc: dict) -> str:
    """The wave's one closing line: status, legs, tokens, dollars, where its files are."""
    u = doc["usage"]
    exact = "" if doc["cost_exact"] else " (a floor: some legs' cost is unknown)"
    legs = len(doc["legs"])
    return (f"wave {doc['wave_id']}: {doc['status']} · {legs} leg{'s' * (legs != 1)} · "
            f"{u['input_tokens']:,} in + {u['output_tokens']:,} out tokens{_estimated(doc)} · "
            f"{_money(doc['cost_usd'])}{exact} · files: {doc['runs_dir']}/{doc['wave_id']}")
