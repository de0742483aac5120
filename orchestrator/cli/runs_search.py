"""``orch runs search TEXT``: past waves, councils and deliberations found by the text of their
prompts and answers, newest first, each with where the words are (inert on the terminal)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.ledger.search import DEFAULT_LIMIT
from orchestrator.notices import say

INDEX_WORDS = {"fts5": "SQLite FTS5", "tsvector": "PostgreSQL tsvector",
               "scan": "a scan (this SQLite has no FTS5)", "none": "no ledger yet"}


class _Words(click.Command):
    """Every token that is not one of the command's options is a word of the search, in
    order: ``-bucket`` excludes a word (click would read it as ``-b -u -c ...``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        valued, flags = set(), set(self.get_help_option_names(ctx))
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                (flags if param.is_flag else valued).update(param.opts)
        options, words = [], []
        tokens = iter(args)
        for token in tokens:
            if token == "--":
                words += list(tokens)
                break
            name = token.split("=", 1)[0]
            if name in valued:
                options.append(token)
                if "=" not in token:
                    options.append(next(tokens, ""))
            elif name in flags:
                options.append(token)
            else:
                words.append(token)
        return super().parse_args(ctx, [*options, "--", *words])


@click.command(cls=_Words)
@click.argument("text", nargs=-1)
@click.option("--limit", type=click.IntRange(1, 1000), default=DEFAULT_LIMIT, show_default=True,
              help="At most this many runs, newest first.")
@click.option("--since", help="Only legs recorded since: 30m, 24h, 7d, 2w or an ISO date.")
@click.option("--json", "as_json", is_flag=True, help="Print what was found as JSON.")
@click.option("--reindex", is_flag=True,
              help="First index the runs under --runs-dir (recorded before the index existed, "
                   "or whose entries were lost); safe to repeat.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the runs are, for --reindex (default ORCH_HOME/runs).")
def search(text, limit, since, as_json, reindex, runs_dir):
    """Find past runs by the text of their prompts and answers, newest first.

    \b
    Words must all match; "a phrase" in order; OR between words; -word must not match;
    word* matches any word starting with it.

    \b
    Examples:
      orch runs search rate limit
      orch runs search '"connection pool"' OR pgbouncer --since 30d
      orch runs search deadlock --json --limit 5
      orch runs search --reindex        # index runs recorded before the index existed
    """
    from orchestrator.app.search import reindexed, searched
    from orchestrator.cli.common import print_json
    from orchestrator.errors import UsageProblem

    for word in text:
        if word.startswith("--") and len(word) > 2:  # a mistyped option, never a term
            raise UsageProblem(f"orch runs search has no option {word.split('=')[0]}; see "
                               "`orch runs search --help` (to find the word, leave out "
                               "the dashes)")
    words = " ".join(text).strip()
    if not words and not reindex:
        raise UsageProblem("orch runs search needs words to find, e.g. `orch runs search "
                           "rate limit` (or --reindex to index past runs)")
    if reindex:
        done = reindexed(runs_dir)
        line = (f"indexed {done.legs:,} leg(s) of {done.waves:,} wave(s) "
                f"({done.added:,} new) with {INDEX_WORDS.get(done.index, done.index)}")
        if not words:
            if as_json:
                print_json(done.to_dict())
            else:
                click.echo(line)
            return
        say(line)
    found = searched(words, limit=limit, since=since)
    if found.index == "scan":
        say("note: this Python's SQLite has no FTS5: the search read every indexed leg "
            "(slower; docs/operations.md)")
    if as_json:
        print_json(found.to_dict())
        return
    if not found.runs:
        click.echo(f"no runs match {found.query!r}"
                   + (" (no ledger yet)" if found.index == "none" else ""))
        return
    _print(found, terminal=sys.stdout.isatty())


def _print(found, *, terminal: bool) -> None:
    from orchestrator.security.outlet import console

    out = console(force_terminal=True) if terminal else None  # asked: stdout is a terminal
    for run in found.runs:
        when = run.last_at.strftime("%Y-%m-%d %H:%M")
        head = (f"{run.id}  {run.kind}  {when}  {run.matches} leg(s) match"
                + (f"  [{run.tag}]" if run.tag else ""))
        _line(out, [(head, False)])
        if run.question:
            _line(out, [("  " + run.question, False)])
        for hit in run.hits:
            _line(out, [(f"  {hit.kind} {hit.model} {hit.field}: ", False), *hit.parts()])
    if found.total > len(found.runs):
        _line(out, [(f"showing the newest {len(found.runs)} of {found.total} runs; "
                     "--limit shows more", False)])


def _line(out, parts: list[tuple[str, bool]]) -> None:
    """One line: model and provider text made inert; a match bold on a terminal, between
    ``**`` otherwise."""
    from orchestrator.security.outlet import inert

    if out is None:
        click.echo("".join(f"**{inert(t)}**" if bold and t else inert(t) for t, bold in parts))
        return
    from rich.text import Text

    line = Text(no_wrap=False)
    for text, bold in parts:
        line.append(inert(text), style="bold" if bold else None)
    out.print(line, soft_wrap=True, highlight=False)
