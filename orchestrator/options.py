"""An option a plugin declares once (``register_options``): the CLI renders it as a click
option, ``orch mcp`` as a JSON Schema property, and its value reaches the plugin in the
wave's options (``leg.options[option.key]``). docs/plugins.md describes it for authors."""

from __future__ import annotations

from dataclasses import dataclass

TYPES = ("int", "float", "choice", "bool", "str")
# The commands (and MCP tools) a plugin's options can join. ``bench`` (``orch bench``, ``orch
# bench resume``) renders only the run ceilings: its trials are waves of their own.
COMMANDS = ("fanout", "council_run", "bench")
USD = ("USD", "US$", "$", "DOLLARS", "US DOLLARS")


@dataclass(frozen=True)
class Option:
    """``name`` is the flag without its dashes (``max-words`` -> ``--max-words``, the MCP
    argument and the options key ``max_words``); ``min``/``max`` bound an int or float
    (``min_open``: the minimum itself is refused); ``config`` names the
    ``plugin_config.<plugin>.<key>`` the plugin falls back to when the option is not given;
    ``mcp=False`` keeps it off the MCP tools; ``inert`` lists values that ask the plugin for
    nothing (a reasoning effort of ``none``), allowed even when the plugin is not loaded.
    ``run_ceiling``: a dollar ceiling over a whole run. A run of several waves (a council's
    stages, a deliberation's rounds, a bench's trials, a retry family) hands each wave what
    the run has left of it, and a retry keeps it (orchestrator/run_ceiling.py). ``unit``
    says what the number counts, in ``--help`` and the MCP schema; a run ceiling's is US
    dollars (another unit is refused: orch converts no currency). ``mcp_help``: the MCP
    description, when it should differ from ``help``."""

    name: str
    type: str = "str"
    help: str = ""
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    config: str | None = None
    mcp: bool = True
    mcp_help: str | None = None
    inert: tuple = ()
    run_ceiling: bool = False
    unit: str | None = None  # what the number counts ("words", "USD"): said in --help and MCP

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"option {self.name!r}: type {self.type!r} is not one of "
                             f"{', '.join(TYPES)}")
        if self.type == "choice" and not self.choices:
            raise ValueError(f"option {self.name!r}: a choice needs choices")
        if not self.name or self.name.startswith("-") or not self.name.replace(
                "-", "").isalnum():
            raise ValueError(f"option {self.name!r}: a name is letters, digits and dashes, "
                             "without the leading --")
        if self.run_ceiling and self.type != "float":
            raise ValueError(f"option {self.name!r}: a run ceiling is a float (dollars)")
        if self.run_ceiling and self.unit is not None and self.unit.upper() not in USD:
            raise ValueError(f"option {self.name!r}: a run ceiling is counted in US dollars (the "
                             f"ledger's unit), not {self.unit!r}, and orch converts no "
                             "currency; declare unit='USD', or make it a plain option your "
                             "plugin converts")

    @property
    def described(self) -> str:
        """The help with the unit said (a run ceiling's is US dollars, declared or not)."""
        unit = self.unit or ("USD" if self.run_ceiling else None)
        return f"{self.help} [unit: {unit}]".strip() if unit else self.help

    @property
    def key(self) -> str:
        return self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return "--" + self.name
