"""The CLI's checks, said in a tool's words.

The pre-spend checks are the CLI's own, shared and never copied, so their messages name the
CLI's flags (``--context``). An MCP client passes a tool's arguments, not flags: its tool
error names ``context`` instead. A flag the tool has no argument for (``--max-legs``) stays
as it is, and the line says it is the CLI's. Text in backticks is a command to run
(`` `orch council save NAME --models a,b` ``) and is left alone.

The table below names the tools' own arguments; the plugins' options (``register_options``)
are named from their declarations, as the tools' schemas are (schemas.option_arguments).
"""

from __future__ import annotations

import re

FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*(?![\w-])")
_WAVE = {"--models": "models", "--council": "council", "--prompt": "prompt",
         "--context": "context", "--chair": "chair", "--timeout": "timeout_minutes",
         "--tools": "tools", "--tag": "tag",
         "--no-validate-models": "validate_models: false"}
ARGUMENTS: dict[str, dict[str, str]] = {
    "fanout": {**_WAVE, "--rounds": "rounds", "--peers": "peers", "--aggregate": "aggregate",
               "--synthesis": "synthesis", "--continue": "continue_wave"},
    "council_run": {**_WAVE, "--diff": "diff"},
    "spend": {"--since": "since", "--group-by": "group_by"},
    "runs": {"--since": "since", "--status": "status"},
}
COMMANDS = {"fanout": "orch fanout", "council_run": "orch council run", "spend": "orch spend",
            "runs": "orch runs"}


def in_tool_words(tool: str, text: str, given: object = None,
                  declared: dict[str, str] | None = None) -> str:
    """``text`` with each CLI flag of ``tool`` named as the tool's argument. The strings in
    ``given`` (the call's arguments: a path may hold ``--models``) are quoted untouched.
    ``declared``: {flag: argument} of the plugins' options the tool takes."""
    names = {**(declared or {}), **ARGUMENTS.get(tool, {})}
    cli_only: list[str] = []

    def say(match: re.Match) -> str:
        flag = match.group(0)
        if flag in names:
            return names[flag]
        if flag not in cli_only:
            cli_only.append(flag)
        return flag

    values = sorted({v for v in _strings(given) if "--" in v}, key=len, reverse=True)
    theirs = re.compile("(" + "|".join(map(re.escape, values)) + ")") if values else None
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside backticks (an unpaired one: to the end)
        pieces = theirs.split(parts[i]) if theirs else [parts[i]]
        parts[i] = "".join(FLAG.sub(say, piece) if j % 2 == 0 else piece
                           for j, piece in enumerate(pieces))
    said = "`".join(parts)
    if cli_only and tool in COMMANDS:
        said += (f" ({', '.join(cli_only)}: an option of `{COMMANDS[tool]}` only; this tool "
                 "has no such argument)")
    return said


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []
