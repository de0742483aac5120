"""A tool call a model asked for, run: the tool looked up in the leg's roster, the arguments
read as a JSON object (or the reason they cannot be, for the model to read), the tool run,
and its result through the intake before it joins the conversation.
"""

from __future__ import annotations

import json

from orchestrator.intake import Policy
from orchestrator.request import ToolCall
from orchestrator.security.credential_content import note
from orchestrator.tools import Tool

# An after_response plugin that finds a call's arguments unusable replaces them with a JSON
# object holding this key and what is wrong: the tool does not run, the model gets the reason.
REJECTED_ARGUMENTS = "_orch_rejected"


async def run_call(call: ToolCall, tools: dict[str, Tool], intake: Policy
                   ) -> tuple[str, list[str]]:
    """What the model reads back for ``call`` (an error it can act on, when the tool is
    unknown, its arguments unusable or it failed), and the intake's rules that withheld
    part of it."""
    tool = tools.get(call.name)
    if tool is None:
        content = (f"error: no tool named {call.name!r}; available: "
                   f"{', '.join(sorted(tools)) or 'none'}")
    else:
        content = await call_tool(tool, call.arguments)
    return withhold(intake, content)


def withhold(intake: Policy, content: str) -> tuple[str, list[str]]:
    """Any tool's result, a third party's included, through the intake now (the wire
    would withhold it anyway): a registered key masked, credential content (a private
    key, a token in a URL, ...) replaced by a rule the model can read and a line naming
    the rules; the rules that withheld something (the leg counts them)."""
    got = intake.text(content, anonymous=False)
    if not got.withheld:
        return got.text, []
    text = f"{got.text}\n{note(got.withheld)}"
    intake.passed(text, anonymous=False)  # the wire passes it as it is
    return text, list(got.withheld)


async def call_tool(tool: Tool, arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"error: the arguments are not valid JSON ({exc.msg}); send a JSON object"
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object"
    if REJECTED_ARGUMENTS in args:
        return f"error: {args[REJECTED_ARGUMENTS]}"
    try:
        return await tool.run(args)
    except TypeError as exc:
        return f"error: bad arguments for {tool.name}: {exc}"
    except Exception as exc:
        return f"error: {tool.name} failed: {type(exc).__name__}: {exc}"
