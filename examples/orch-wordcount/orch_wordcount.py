"""orch-wordcount: a ``word_count`` tool for models, and ``orch wordcount`` for people.

Models are poor at counting words; a tool is exact. The tool is offered only when switched on
(``plugin_config.wordcount.tool = true`` in config.json), because every offered tool costs
prompt tokens on every request of every leg. The command is always there.
"""

from __future__ import annotations

import json

import click

from orchestrator import workspace
from orchestrator.hookspecs import hookimpl
from orchestrator.tools import Tool

NAME = "wordcount"


def count(text: str) -> dict[str, int]:
    return {"words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)}


def word_count_tool(leg) -> Tool:
    def word_count(text: str | None = None, path: str | None = None) -> dict[str, int] | str:
        """Count the words, lines and characters of a text or a workspace file, exactly.

        Args:
            text: The text to count.
            path: Or: a file in the workspace, relative to its root.
        """
        if (text is None) == (path is None):
            return "error: pass exactly one of `text` or `path`"
        if path is not None:
            if leg.workspace is None:
                return "error: this leg has no workspace; pass `text` instead"
            try:  # orch's own rules: inside the root, no credential file, text only
                text = workspace.read_text(path, leg.workspace, **workspace.rules(leg))
            except workspace.PathRefused as refused:
                return f"error: cannot read {path}: {refused}"
        return count(text)

    return Tool.from_function(word_count)  # the schema comes from the hints and docstring


@hookimpl
def register_tools(leg):
    if leg.plugin_config(NAME).get("tool"):
        return [word_count_tool(leg)]
    return None


@click.command(name="wordcount")
@click.argument("files", nargs=-1, type=click.File("r", encoding="utf-8"))
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def wordcount_command(files, as_json: bool) -> None:
    """Count words, lines and characters of FILES (or stdin), like the model's tool does."""
    files = files or (click.get_text_stream("stdin"),)
    counts = {("-" if f.name == "<stdin>" else f.name): count(f.read()) for f in files}
    if as_json:
        click.echo(json.dumps(counts))
        return
    for name, c in counts.items():
        click.echo(f"{c['words']:>8} words {c['lines']:>6} lines {c['chars']:>8} chars  {name}")


@hookimpl
def register_commands(cli):
    cli.add_command(wordcount_command)
