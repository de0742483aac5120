"""``orch model``: per-model settings. ``set-tier`` pins a model's capability tier.

The tier itself is applied by the ``tiers`` plugin, which reads
``plugin_config.tiers.models``; this command only writes that map, keyed by the model's
canonical name (aliases are expanded, a ``@variant`` is dropped: the tier is the model's).
"""

from __future__ import annotations

import json

import click

from orchestrator.config import Config
from orchestrator.errors import UsageProblem

SECTION = "tiers"


def _canonical(spec: str, cfg: Config) -> str:
    from orchestrator import runtime
    from orchestrator.models.resolve import resolve_all

    if not spec.strip():
        raise UsageProblem("empty model name; pass PROVIDER/MODEL, e.g. myvllm/qwen3-4b")
    return resolve_all([spec], cfg, runtime.plugin_manager())[0].base_name


@click.group()
def model() -> None:
    """Per-model settings (model set-tier|tiers).

    \b
    Examples:
      orch model set-tier myvllm/qwen3-8b minimal
      orch model set-tier myvllm/qwen3-8b auto     # back to the automatic decision
      orch model tiers
    """


@model.command("set-tier")
@click.argument("model_name", metavar="MODEL")
@click.argument("tier", type=click.Choice(["minimal", "default", "auto"]))
def set_tier(model_name: str, tier: str) -> None:
    """Pin MODEL to the minimal or default tier (auto: decide from catalogue and name).

    minimal: a compact system prompt, the minimal tool roster, grammar-safe tool schemas and
    pinned sampling (see docs/tools-and-tiers.md)."""
    cfg = Config.load()
    name = _canonical(model_name, cfg)
    plugin_config = cfg.section("plugin_config")
    settings = plugin_config.setdefault(SECTION, {})
    models = settings.setdefault("models", {})
    if tier == "auto":
        if models.pop(name, None) is None:
            click.echo(f"{name} had no tier set; nothing changed")
            return
        if not models:
            settings.pop("models")
        if not settings:
            plugin_config.pop(SECTION)
        message = f"{name}: tier decided automatically again"
    else:
        models[name] = tier
        message = f"{name}: tier {tier}"
    cfg.save()
    from orchestrator import runtime

    runtime.config.cache_clear()
    click.echo(message)


@model.command("tiers")
@click.option("--json", "as_json", is_flag=True, help="Print the map as JSON.")
def tiers(as_json: bool) -> None:
    """List the models whose tier is set in config."""
    models = Config.load().plugin_config(SECTION).get("models") or {}
    if as_json:
        click.echo(json.dumps(models, indent=2, sort_keys=True))
        return
    if not models:
        click.echo("no tiers set; every model's tier is decided automatically "
                   "(orch model set-tier MODEL minimal)")
        return
    for name, tier in sorted(models.items()):
        click.echo(f"{name}  {tier}")
