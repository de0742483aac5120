"""orch: run one briefing across several LLMs at once, with honest cost accounting."""

__version__ = "0.1.0"


def plugin_config(name: str) -> dict:
    """A plugin's settings, ``plugin_config.<name>`` in config.json (``{}`` when absent), for
    code outside a leg: a plugin's subcommand, a script. Inside hooks use
    ``leg.plugin_config(name)`` or ``wave.plugin_config(name)`` (the run's own config)."""
    from orchestrator.config import Config

    return dict(Config.load().plugin_config(name))
