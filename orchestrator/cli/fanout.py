"""``orch fanout``: one briefing, N models at once, every leg in the spend ledger."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.app.requests import DEFAULT_MAX_LEGS, MAX_TIMEOUT_MIN
from orchestrator.briefing import prompt_source_name, read_prompt
from orchestrator.cli.common import print_json
from orchestrator.cli.daemon_option import no_daemon_option
from orchestrator.cli.params import FiniteFloat
from orchestrator.cli.plugin_options import PluginOptionsCommand


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
              default=None, metavar="MINUTES",
              help="Per-leg time limit (a retry or --continue: the wave's own).  "
                   "[default: 10]")
@click.option("--max-steps", type=click.IntRange(1, 200), default=None,
              help="Requests one leg may make (tool rounds); the last one asks for the "
                   "answer (a retry or --continue: the wave's own).  [default: 20]")
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
@click.option("--continue", "continue_wave", is_flag=False, flag_value="last", default=None,
              metavar="[WAVE_ID]",
              help="Follow up: ask each leg of that wave (default: the last) the new prompt "
                   "with its own conversation, as a new wave linked to it.")
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
           tools_mode, workspace, workspace_any, max_legs, tag, retry_failed, continue_wave, no_plugins,
           runs_dir, as_json, quiet, no_validate, no_daemon, budgets, words):
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
      orch fanout --continue "And on Windows?"            # the last wave's legs, again
    """
    from orchestrator import runtime
    from orchestrator.app import requests
    from orchestrator.app.prepare import prepare
    from orchestrator.cli.running import Renderer, run

    if quiet:
        runtime.quiet()  # -q: only errors on stderr, rate_limit_hold warnings included
    request = requests.fanout(
        retry_failed=retry_failed, continue_wave=continue_wave, models=models, council=council, words=tuple(words),
        prompt=None if retry_failed or words or _prompt_in(continue_wave)
        else read_prompt(prompt, prompt_file),
        prompt_flags=tuple(f for f, v in (("--prompt", prompt), ("--prompt-file", prompt_file))
                           if v is not None),
        prompt_source=prompt_source_name(prompt, prompt_file), context=tuple(context),
        chair=chair, synthesis=synthesis, aggregate=aggregate, rounds=rounds, peers=peers,
        tools=tools_mode, max_legs=max_legs,
        timeout_min=timeout_min, max_steps=max_steps, workspace=workspace,
        workspace_any=workspace_any, tag=tag, no_plugins=no_plugins,
        runs_dir=str(runs_dir) if runs_dir else None, budgets=dict(budgets),
        validate_models=not no_validate, quiet=quiet)
    prepared = click.get_current_context().with_resource(prepare(request))
    # one answer is the output: on a terminal it is shown as it streams (under the live
    # table, on stderr); stdout gets it at the end, the same as in a pipe
    renderer = Renderer(quiet=quiet or as_json, preview=prepared.single_answer)
    with _output_on_hard_exit(prepared.kind, as_json):
        doc, code, _ = run(prepared, renderer=renderer, no_daemon=no_daemon)
    _output(doc, as_json, prepared.kind)
    say_run(doc)
    sys.exit(code)


def _output(doc: dict, as_json: bool, kind: str) -> None:
    """The command's output: the document (``--json``) or the answers."""
    if as_json:
        print_json(doc)
        return
    print_human(doc)
    if kind == "deliberation":
        print_outcome(doc)
    from orchestrator.chair.lines import synthesis_lines
    from orchestrator.votes.lines import vote_lines

    for line in [*synthesis_lines(doc.get("synthesis")), *vote_lines(doc.get("aggregate"))]:
        click.echo(line)


def _output_on_hard_exit(kind: str, as_json: bool):
    """Should orch's hard exit end the run (something held it past the signal's 1.5 s), the
    output is still printed, from the wave.json it wrote: a ``--json`` reader gets its
    document, not an empty stdout. A deliberation's document is not one wave's: none."""
    from contextlib import nullcontext

    from orchestrator import jobscope

    if kind == "deliberation":
        return nullcontext()

    def say(signum: int, documents: list) -> None:
        if documents:
            _output(documents[-1], as_json, kind)

    return jobscope.last_words(say)


def _prompt_in(continue_wave: str | None) -> bool:
    """``--continue "why?"``: the prompt came as the option's value (app/requests.py)."""
    from orchestrator.app.requests import looks_like_wave_id

    return continue_wave is not None and not looks_like_wave_id(continue_wave)


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
    if doc.get("parent_wave_id"):  # a follow-up (--continue)
        say(f"wave {doc['wave_id']} continues wave {doc['parent_wave_id']}")
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


def outcome_lines(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What the run says about its rounds and stop rule (stderr), and its winner (stdout)."""
    about = []
    for r in doc.get("rounds") or []:
        cast = sum(1 for leg in r["legs"] if leg.get("vote"))
        counted = sum(1 for leg in r["legs"] if (leg.get("vote") or {}).get("answer_digest"))
        declined = sum(1 for leg in r["legs"] if leg.get("declined"))
        votes = f"{cast} vote{'' if cast == 1 else 's'}" if cast == counted \
            else f"{cast} votes cast, {counted} counted"
        votes += f" · {declined} declined" if declined else ""
        cost = "unknown" if not r["cost_exact"] and not r["cost_usd"] else f"${r['cost_usd']:.4f}"
        about.append(f"round {r['round']}: {len(r['legs'])} legs · {r['changed']} changed · "
                     f"{votes} · {r['requests']} requests · {cost}")
    stop = doc.get("stop")
    if stop:
        about.append(f"stopped: {stop['rule']} after round {stop['after_round']}"
                     + (f" (also: {', '.join(stop['also'])})" if stop.get("also") else ""))
    win = doc.get("winner")
    result = []
    if win:
        tie = f"; tie broken by {win['tie_break']}" if win.get("tie_break") else ""
        held = f"held by {win['holders']} of {len(doc.get('legs') or [])} legs"
        if win.get("by") == "holders":
            result.append(f"Winner: {', '.join(win['models'])} ({held}; no vote counted{tie})")
        else:
            support = win.get("support", win["holders"] + win["votes"])
            result.append(f"Winner by support: {', '.join(win['models'])} (support {support}: "
                          f"{held} + {win['votes']} vote{'' if win['votes'] == 1 else 's'} "
                          f"from other legs in round {win['votes_round']}{tie})")
    return about, result


def print_outcome(doc: dict[str, Any]) -> None:
    """The winner on stdout; the rounds and the stop rule said on stderr."""
    from orchestrator.notices import say

    about, result = outcome_lines(doc)
    for line in result:
        click.echo(line)
    for line in about:
        say(line)
