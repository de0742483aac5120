"""Our team's rules: no production host leaves, a `lookup` tool, an `orch house-rules` command."""

import click

import orchestrator
from orchestrator.errors import Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.tools import Tool

NAME = "house_rules"
GLOSSARY = {"wave": "one briefing run on several models", "leg": "one model's run"}


@hookimpl
def before_request(leg, request):
    hosts = leg.plugin_config(NAME).get("hosts", ["prod.internal"])
    for message in request.messages:
        if any(h in str(message.get("content") or "") for h in hosts):
            raise Refusal("PROD_HOSTNAME", "the briefing names a production host; remove it")
    return None


def lookup(term: str, exact: bool = False) -> str:
    """Look a term up in the team glossary.

    Args:
        term: The term to look up.
        exact: Match the case exactly.
    """
    key = term if exact else term.lower().strip()
    return GLOSSARY.get(key, f"no entry for {term}")


@hookimpl
def register_tools(leg):
    return [Tool.from_function(lookup)]


@click.command(name="house-rules")
def house_rules_command():
    """Show the production hosts that are refused."""
    for host in orchestrator.plugin_config(NAME).get("hosts", ["prod.internal"]):
        click.echo(host)


@hookimpl
def register_commands(cli):
    cli.add_command(house_rules_command)
