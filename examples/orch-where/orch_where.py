"""orch-where: a problem is only useful if it says where it is, in every mode of orch.

- **Council** (``orch council run --unlocated drop``, or MCP ``council_run``'s ``unlocated``):
  a seat's finding with no ``location`` is dropped from its findings block before orch reads
  it, so it is never judged, tallied or shown to the chair; the seat's leg records how many
  under ``unlocated_findings``.
- **Deliberation** (``plugin_config.where.rounds``): from round 2 on, each leg records its
  reply's ``decision`` and ``vote`` as orch read them (``round_decision``, ``round_vote``)
  in its ``metadata.json``.
- **Bench** (``plugin_config.where.bench``): a model contestant's trial is asked to end its
  answer with ``path:line``.

Each is asked for (installed, the plugin changes nothing by itself). It reads where it runs
and what a seat or a round said through ``orchestrator.modes``, the core's own readers, never
a copy of orch's formats.
"""

from __future__ import annotations

import json

from orchestrator import modes
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

NAME = "where"
BENCH_RULE = "End your answer with the location of what you found, as path:line."


@hookimpl
def register_options(command):
    if command == "council_run":
        return [Option("unlocated", type="choice", choices=("keep", "drop"),
                       help="A seat's finding that names no location: keep it (default) or "
                            "drop it before it is judged.",
                       mcp_help="keep (default) or drop a council finding with no location")]


@hookimpl
def after_response(leg, request, response):
    """A review stage's answer, its unlocated findings taken out of the block."""
    if leg.options.get("unlocated") != "drop" or response.tool_calls:
        return None
    if not (modes.council_stage(leg) or "").startswith("review"):
        return None
    findings = modes.seat_findings(response.text or "")
    if not findings:
        return None  # no readable block: orch asks the seat to repair it, as it would
    located = [f for f in findings if (f.get("location") or "").strip()]
    leg.set("unlocated_findings", len(findings) - len(located))
    if len(located) == len(findings):
        return None
    block = [{"id": f["local_id"], "severity": f["severity"], "claim": f["claim"],
              "location": f["location"], "rationale": f.get("rationale", "")} for f in located]
    prose = (response.text or "").rsplit("```json", 1)[0].rstrip()
    return response.evolve(text=f"{prose}\n\n```json\n{json.dumps(block)}\n```\n")


@hookimpl
def leg_end(leg, record):
    """A later deliberation round's decision and vote, on the leg's record."""
    round_no = modes.deliberation_round(leg)
    if not round_no or round_no < 2 or not leg.plugin_config(NAME).get("rounds"):
        return
    reply = modes.round_reply(record.answer or "")
    if reply is not None:
        leg.set("round_decision", reply.get("decision"))
        leg.set("round_vote", reply.get("vote"))


@hookimpl
def system_prompt(leg):
    """A bench trial asks for the location it will be graded on."""
    if modes.bench_trial(leg) and leg.plugin_config(NAME).get("bench"):
        return BENCH_RULE
    return None
