"""What each MCP tool does, through the same functions the CLI commands call: the same
pre-flight checks, plugins, budgets, ledger rows and files as `orch fanout`, `orch council
run`, `orch spend --json` and `orch runs --json`. No SDK import here: a tool gets its
arguments (already checked against its schema) and a :class:`Job`, and returns a document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from orchestrator.engine.record import RUNNING
from orchestrator.mcp_server.confine import context_paths
from orchestrator.security.secrets import scrub_doc

TOP_FINDINGS = 10  # council_run returns the most agreed-on findings; report.md has them all
MAX_STEPS = 20  # `orch fanout`'s default --max-steps


class Job(Protocol):
    """One tool call as a tool sees it (server.py implements it)."""

    def progress(self, value: float, total: float | None, message: str) -> None: ...

    async def run(self, run: Callable[[], Awaitable[dict[str, Any]]],
                  interrupt: Callable[[int], None]) -> dict[str, Any]: ...


class LegProgress:
    """Each leg's start and end as a progress notification: a running leg counts a half, an
    ended one a whole, so the value rises with every change; the message is the line `orch
    fanout` prints on stderr."""

    def __init__(self, job: Job, total: int | None) -> None:
        self.job, self.total = job, total
        self._status: dict[str, str] = {}

    def __call__(self, ctx) -> None:
        from orchestrator.progress import plain_line

        r = ctx.record
        if self._status.get(r.leg_id) == r.status or r.status == "pending":
            return
        self._status[r.leg_id] = r.status
        value = sum(0.5 if s == RUNNING else 1.0 for s in self._status.values())
        self.job.progress(value, self.total, plain_line(r))


def _budgets(args: dict[str, Any], tool: str) -> dict[str, Any]:
    """The plugins' declared options (every argument the tool's schema has beyond its own:
    the schema was checked, so no other can be here); a float one as a float, as the CLI
    gives it (a JSON ``1`` is ``1.0`` in wave.json)."""
    from orchestrator import runtime
    from orchestrator.mcp_server.schemas import CORE_ARGUMENTS
    from orchestrator.plugin_host.declared import declared_options

    out = {k: v for k, v in args.items() if k not in CORE_ARGUMENTS[tool] and v is not None}
    floats = {o.key for _, o in declared_options(runtime.plugin_manager(), tool)
              if o.type == "float"}
    return {k: float(v) if k in floats and not isinstance(v, bool) else v
            for k, v in out.items()}


def _models(args: dict[str, Any]) -> str | None:
    return ",".join(args["models"]) if args.get("models") else None


async def fanout(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch fanout --json`: the wave document."""
    from orchestrator import config as config_mod
    from orchestrator import runtime
    from orchestrator.app.model_choice import choose_models
    from orchestrator.app.wave import DEFAULT_MAX_LEGS, prepare_wave
    from orchestrator.briefing import compose, read_context, read_prompt
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave
    from orchestrator.errors import OrchError

    if args.get("peers") is not None and int(args.get("rounds") or 1) == 1:
        raise OrchError("peers only applies to a deliberation; add rounds (2 or more)")
    cfg = runtime.config()
    specs = choose_models(_models(args), args.get("council"), cfg, runtime.plugin_manager())
    briefing = compose(read_prompt(args["prompt"], None),
                       read_context(context_paths(args.get("context") or [])))
    # in a worker thread: the model check's GET /models (up to 3 s) must not stall the
    # event loop that answers the other calls and pumps their progress
    spec, pm = await anyio.to_thread.run_sync(lambda: prepare_wave(
        specs, briefing, "prompt", cfg=cfg, runs=config_mod.runs_dir(), chair=args.get("chair"),
        timeout_min=float(args.get("timeout_minutes", 10.0)), max_steps=MAX_STEPS,
        tools_mode=args.get("tools", "read"), workspace=None, workspace_any=False,
        max_legs=DEFAULT_MAX_LEGS, tag=args.get("tag"), no_plugins=False,
        budgets=_budgets(args, "fanout"), validate_models=args.get("validate_models", True),
        aggregate=args.get("aggregate"), synthesis=args.get("synthesis"),
        rounds=int(args.get("rounds") or 1)))
    rounds = int(args.get("rounds") or 1)
    if rounds > 1:  # a deliberation (docs/deliberation.md): how many rounds run is not known
        from orchestrator.deliberation.run import Deliberation

        run = Deliberation(spec, pm=pm, config=cfg, rounds=rounds, peers=args.get("peers"),
                           ledger=LedgerSink().preflight(), observe=LegProgress(job, None))
        return scrub_doc(await job.run(run.run, run.interrupt))
    total = len(spec.models) + (1 if spec.chair else 0)
    wave = Wave(spec, pm=pm, config=cfg, ledger=LedgerSink().preflight(),
                observe=LegProgress(job, total))
    return scrub_doc(await job.run(wave.run, wave.interrupt))


async def council_run(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch council run`: the verdict, tiers, top findings and where the report is."""
    from orchestrator import runtime
    from orchestrator.app.council import prepare_council
    from orchestrator.briefing import read_prompt

    prompt, cfg = read_prompt(args["prompt"], None), runtime.config()
    context = tuple(context_paths(args.get("context") or []))
    run = await anyio.to_thread.run_sync(lambda: prepare_council(  # GET /models: off the loop
        prompt, "prompt", cfg=cfg, models=_models(args),
        council_name=args.get("council"), chair=args.get("chair"), diff=args.get("diff"),
        context=context, timeout_min=float(args.get("timeout_minutes", 10.0)),
        max_steps=MAX_STEPS, tools_mode=args.get("tools", "read"), workspace=None,
        workspace_any=False, tag=args.get("tag"), no_plugins=False, runs_dir=None,
        budgets=_budgets(args, "council_run"), observe=LegProgress(job, None),
        validate_models=args.get("validate_models", True)))
    doc = await job.run(run.run, run.interrupt)
    return scrub_doc(council_summary(doc, run.tally, run.chair.synthesis))


def council_summary(doc: dict[str, Any], tally: dict[str, Any] | None,
                    synthesis: str | None) -> dict[str, Any]:
    groups = (tally or {}).get("groups") or []
    top = [{"id": g["id"], "tier": g["tier"], "severity": g["severity"],
            "location": g["location"], "claim": g["claim"], "seats": g["seats"],
            "agree": g["counts"]["agree"], "dispute": g["counts"]["dispute"],
            "neutral": g["counts"]["neutral"]} for g in groups[:TOP_FINDINGS]]
    where = Path(doc["dir"])
    return {key: doc.get(key) for key in ("run_id", "status", "exit_code", "error", "verdict",
                                          "chair", "tiers", "usage", "cost_usd", "cost_exact",
                                          "notices", "degraded")} | {
        "findings": len(groups), "top_findings": top, "chair_synthesis": synthesis,
        "report": str(where / "report.md"), "report_html": str(where / "report.html"),
        "dir": str(where)}


async def spend(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch spend --json`."""
    from orchestrator.app.spend import spend_json
    from orchestrator.mcp_server.bounded import bounded

    doc = spend_json(args.get("since", "7d"), args.get("group_by"))
    if not args.get("group_by"):
        return doc
    return bounded(doc, "groups", args.get("limit"), "raise limit, narrow since, or run "
                   "`orch spend --group-by " + str(args["group_by"]) + "` for all of them")


async def runs(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch runs --json` or `orch runs show ID --json`."""
    from orchestrator.app.runs import listed, shown
    from orchestrator.errors import OrchError

    if args.get("action", "list") == "show":
        if not args.get("id"):
            raise OrchError("runs: action 'show' needs an id; call runs with action 'list' "
                            "to see them")
        return scrub_doc(shown(None, args["id"])[1])
    from orchestrator.mcp_server.bounded import bounded

    found = listed(None, args.get("since"), tuple(args.get("status") or ()))  # newest first
    return scrub_doc(bounded({"runs": [e.to_dict() for e in found]}, "runs", args.get("limit"),
                             "raise limit, pass since or status, or run `orch runs`"))


JOBS: dict[str, Callable[[dict[str, Any], Job], Awaitable[dict[str, Any]]]] = {
    "fanout": fanout, "council_run": council_run, "spend": spend, "runs": runs}


def failure(doc: dict[str, Any]) -> str | None:
    """One line when a fanout or council ran but failed (exit 1, or stopped by a signal or a
    cancel): the tool result is then an MCP error that still carries the document."""
    code = doc.get("exit_code")
    if code in (0, 2, None):
        return None
    name = f"wave {doc['wave_id']}" if "wave_id" in doc else f"council {doc.get('run_id')}"
    if doc.get("signal"):
        return f"{name} {doc.get('status')}: interrupted; legs that ended kept their answers"
    if doc.get("error"):
        return f"{name} {doc.get('status')}: {doc['error']}"
    legs = [*(doc.get("legs") or []), *([doc["chair"]] if doc.get("chair") and
                                        "leg_id" in doc["chair"] else [])]
    reasons = "; ".join(f"{leg['model']}: {leg.get('reason') or leg['status']}"
                        for leg in legs if leg.get("status") != "complete")
    return f"{name} {doc.get('status')}: {reasons or 'no leg completed'}"
