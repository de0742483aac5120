"""orch: run one briefing across several LLMs at once, with honest cost accounting."""

__version__ = "0.1.0"
