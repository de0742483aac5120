"""``orch models``: every model you can address, with what orch knows about each."""

from __future__ import annotations

import click

from orchestrator.cli.common import print_json

COLUMNS = ("NAME", "TIER", "WINDOW", "OUT", "IN $/M", "OUT $/M", "COST", "TOOLS", "REASON",
           "VARIANTS")


def _yes(value) -> str:
    return "?" if value is None else ("yes" if value else "no")


def _num(value) -> str:
    return "?" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


@click.command()
@click.argument("pattern", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the models as JSON.")
@click.option("--refresh", is_flag=True, help="Ask providers again (ignore the 24 h cache).")
def models(pattern, as_json, refresh):
    """List every model you can address: aliases, your providers' models (their `/models`,
    cached 24 h), local models, and litellm's models for providers whose key is set. For each:
    tier, context window, output ceiling, prices per million tokens and where they come from,
    native tool calling, reasoning, and the variants your aliases and councils use.

    PATTERN filters by name: a substring (`qwen`) or a glob (`openai/gpt-4*`).

    \b
    Examples:
      orch models
      orch models myvllm/ --json
    """
    from orchestrator import runtime
    from orchestrator.models import listing as model_list

    doc = model_list.listing(runtime.config(), runtime.plugin_manager(), pattern,
                             refresh=refresh)
    if as_json:
        print_json(doc)
        return
    for pid, source in doc["providers"].items():
        if source in ("unreachable", "stale cache"):
            click.echo(f"note: provider {pid} did not answer GET /models"
                       + (" (its cached list is shown)" if source == "stale cache" else ""),
                       err=True)
    if not doc["models"]:
        click.echo("no models match" if pattern else "no models: declare a provider "
                   "(orch provider add) or set a provider key")
        return
    cells = []
    for r in doc["models"]:
        name = r["name"] + (f" -> {r['target']}" if r.get("target") else "")
        if r.get("error"):
            cells.append((name, "error: " + r["error"], *[""] * 8))
            continue
        cells.append((name, r["tier"] or "?", _num(r["context_window"]),
                      _num(r["max_output_tokens"]), _num(r["input_cost_per_mtok"]),
                      _num(r["output_cost_per_mtok"]), r["cost_source"], _yes(r["tools"]),
                      _yes(r["reasoning"]), ",".join(r["variants"]) or "-"))
    widths = [max(len(row[i]) for row in [COLUMNS, *cells]) for i in range(len(COLUMNS))]
    for row in [COLUMNS, *cells]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
