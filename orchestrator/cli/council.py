"""``orch council``: saved model lists, and (later) multi-model review that runs on them.

Councils are stored as the names the user typed, not resolved models, so changing an alias or
a provider changes every council that uses it.
"""

from __future__ import annotations

import click

from orchestrator.cli.config_cmds import check_name, echo_json
from orchestrator.config import Config
from orchestrator.errors import OrchError
from orchestrator.models import parse_model_list, resolve


@click.group()
def council() -> None:
    """Saved model lists ("councils"): named sets of models to run together.

    A council is a named list of two or more models; `orch fanout --council NAME` runs a
    briefing on all of them at once.

    \b
    Example:
      orch council save review --models myvllm/qwen3-8b,openai/gpt-4o-mini,fast@hot
      orch fanout --council review --prompt "Is this migration safe?"
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
        raise OrchError(f"a council needs at least 2 models, got {len(models)}; "
                        "pass --models a,b[,c...]")
    dupes = sorted({m for m in models if models.count(m) > 1})
    if dupes:
        raise OrchError(f"{', '.join(dupes)} listed twice; to run a model twice give each copy "
                        "a variant (e.g. MODEL@hot,MODEL@cold)")
    config = Config.load()
    for spec in models:
        try:
            resolve(spec, config)
        except OrchError as exc:
            raise OrchError(f"council {name}: {exc}") from None
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
    if name not in config.councils:
        known = ", ".join(sorted(config.councils)) or "none"
        raise OrchError(f"no council {name!r} (saved: {known})")
    del config.councils[name]
    config.save()
    click.echo(f"removed council {name}")


# `council run` and `council stats` are added to this group below (@council.command).
