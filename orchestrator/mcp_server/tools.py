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
from orchestrator.security.word_hold import WordHold

TOP_FINDINGS = 10  # council_run returns the most agreed-on findings; report.md has them all


class Job(Protocol):
    """One tool call as a tool sees it (server.py implements it). ``watches``: the client
    asked for progress, so the legs' text is worth streaming to it."""

    watches: bool

    def progress(self, value: float, total: float | None, message: str) -> None: ...

    async def run(self, run: Callable[[], Awaitable[dict[str, Any]]],
                  interrupt: Callable[[int], None]) -> dict[str, Any]: ...


TEXT_MESSAGE_MAX = 1000  # characters of a leg's text in one progress notification


class LegProgress:
    """Each leg's start and end as a progress notification: a running leg counts a half, an
    ended one a whole; the message is the line `orch fanout` prints on stderr. A watched
    call's legs stream (``Job.watches``): each piece of a leg's text is a notification too,
    ``"LEG_ID MODEL: text"``, a whole word at a time, masked and inert (security/
    word_hold.py), at most ``TEXT_MESSAGE_MAX`` characters each; a running leg's value rises
    towards a whole with its text, so the value rises with every notification (MCP's rule)."""

    def __init__(self, job: Job, total: int | None) -> None:
        self.job, self.total = job, total
        self._status: dict[str, str] = {}
        self._models: dict[str, str] = {}
        self._held: dict[str, WordHold] = {}
        self._chars: dict[str, int] = {}

    def __call__(self, event) -> None:
        from orchestrator.engine.record import LegRecord
        from orchestrator.events import LegEnded, LegProgress, LegStarted, LegText
        from orchestrator.progress import plain_line

        if isinstance(event, LegText):
            hold = self._held.setdefault(event.leg_id, WordHold())
            self._text(event.leg_id, hold.take(event.text))
            return
        if not isinstance(event, LegStarted | LegProgress | LegEnded):
            return
        r = LegRecord.from_dict(event.leg)
        self._models[r.leg_id] = r.model
        if self._status.get(r.leg_id) == r.status or r.status == "pending":
            return
        if r.status != RUNNING and r.leg_id in self._held:  # its last words before its end
            self._text(r.leg_id, self._held.pop(r.leg_id).rest())
        self._status[r.leg_id] = r.status
        self.job.progress(self._value(), self.total, plain_line(r))

    def _value(self) -> float:
        """Half a leg for a running one, plus up to (never quite) half more for its text."""
        return sum(1.0 if s != RUNNING else 0.5 + 0.5 * (c := self._chars.get(leg, 0))
                   / (c + 1000) for leg, s in self._status.items())

    def _text(self, leg_id: str, text: str) -> None:
        if not text or self._status.get(leg_id) != RUNNING:
            return
        label = f"{leg_id} {self._models.get(leg_id, '')}".rstrip()
        for start in range(0, len(text), TEXT_MESSAGE_MAX):
            piece = text[start:start + TEXT_MESSAGE_MAX]
            self._chars[leg_id] = self._chars.get(leg_id, 0) + len(piece)
            self.job.progress(self._value(), self.total, f"{label}: {piece}")


def _budgets(args: dict[str, Any], tool: str) -> dict[str, Any]:
    """The plugins' declared options (every argument the tool's schema has beyond its own),
    checked by the check the CLI's flags and ``orch ui``'s form share
    (orchestrator/option_values.py): a float one as a float, as the CLI gives it (a JSON
    ``1`` is ``1.0`` in wave.json)."""
    from orchestrator import runtime
    from orchestrator.mcp_server.schemas import CORE_ARGUMENTS
    from orchestrator.option_values import given
    from orchestrator.plugin_host.declared import declared_options

    pm = runtime.plugin_manager()
    declared = [(p, o) for p, o in declared_options(pm, tool)
                if o.mcp and o.key not in CORE_ARGUMENTS[tool]]
    return given({k: v for k, v in args.items() if k not in CORE_ARGUMENTS[tool]}, declared,
                 pm=pm, command=tool, source=lambda key: key)


def _models(args: dict[str, Any]) -> str | None:
    return ",".join(args["models"]) if args.get("models") else None


def _common(args: dict[str, Any], tool: str) -> dict[str, Any]:
    """What `orch fanout` and `orch council run` take, from a tool's arguments."""
    # not given: the default, or (continue_wave) the wave's own (engine/leg_limits.py)
    timeout = args.get("timeout_minutes")
    return {"timeout_min": None if timeout is None else float(timeout), "max_steps": None,
            "tag": args.get("tag"), "budgets": _budgets(args, tool),
            "validate_models": args.get("validate_models", True)}


def fanout_request(args: dict[str, Any]):
    """The request `orch fanout` would build for these arguments (app/requests.py)."""
    from orchestrator.app import requests
    from orchestrator.briefing import read_prompt

    return requests.fanout(models=_models(args), council=args.get("council"),
                           continue_wave=_wave_id(args.get("continue_wave")),
                           prompt=read_prompt(args["prompt"], None), prompt_source="--prompt",
                           context=tuple(context_paths(args.get("context") or [])),
                           chair=args.get("chair"), rounds=int(args.get("rounds") or 1),
                           peers=args.get("peers"), tools=args.get("tools", "read"),
                           aggregate=args.get("aggregate"), synthesis=args.get("synthesis"),
                           **_common(args, "fanout"))


def _wave_id(given: str | None) -> str | None:
    """A follow-up's wave as the tool names it: a prompt is never taken for it."""
    from orchestrator.app.requests import looks_like_wave_id
    from orchestrator.errors import UsageProblem

    if given is not None and not looks_like_wave_id(given):
        raise UsageProblem(f"continue_wave is a wave_id from an earlier fanout (or 'last'), "
                           f"not {given[:40]!r}")
    return given


def council_request(args: dict[str, Any]):
    """The request `orch council run` would build for these arguments."""
    from orchestrator.app.requests import Council
    from orchestrator.briefing import read_prompt

    return Council(prompt=read_prompt(args["prompt"], None), prompt_source="--prompt",
                   diff=args.get("diff"), context=tuple(context_paths(args.get("context") or [])),
                   models=_models(args), council=args.get("council"), chair=args.get("chair"),
                   tools=args.get("tools", "read"), **_common(args, "council_run"))


async def _run(request, job: Job, total=None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Prepare ``request`` (in a worker thread: the model check's GET /models, up to 3 s,
    must not stall the event loop that answers the other calls and pumps their progress),
    then run it as ``job``: (document, extra)."""
    from orchestrator.app.prepare import prepare
    from orchestrator.app.start import start

    with await anyio.to_thread.run_sync(prepare, request) as prepared:
        if total is not None:
            total = total(prepared)
        prepared.watch_text = job.watches  # nobody watching: read whole (docs/performance.md)
        handle = start(prepared)
        progress = LegProgress(job, total)
        doc = await job.run(lambda: handle.drive(progress), handle.interrupt)
    return doc, handle.extra


async def fanout(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch fanout --json`: the wave document."""

    def total(prepared) -> int | None:  # a deliberation: how many rounds run is not known
        return None if prepared.kind == "deliberation" else len(prepared.models)

    doc, _ = await _run(fanout_request(args), job, total)
    return scrub_doc(doc)


async def council_run(args: dict[str, Any], job: Job) -> dict[str, Any]:
    """`orch council run`: the verdict, tiers, top findings and where the report is."""
    doc, extra = await _run(council_request(args), job)
    return scrub_doc(council_summary(doc, extra.get("tally"), extra.get("synthesis")))


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
    if args.get("action") == "search":
        return _search(args)
    from orchestrator.mcp_server.bounded import bounded

    found = listed(None, args.get("since"), tuple(args.get("status") or ()))  # newest first
    return scrub_doc(bounded({"runs": [e.to_dict() for e in found]}, "runs", args.get("limit"),
                             "raise limit, pass since or status, or run `orch runs`"))


def _search(args: dict[str, Any]) -> dict[str, Any]:
    """`orch runs search QUERY --json`, at most ``limit`` runs (the rest counted, not sent)."""
    from orchestrator.app.search import searched
    from orchestrator.errors import OrchError
    from orchestrator.mcp_server.bounded import DEFAULT_LIMIT

    if not args.get("query"):
        raise OrchError("runs: action 'search' needs a query (the words to find)")
    limit = int(args.get("limit") or DEFAULT_LIMIT)
    doc = searched(args["query"], limit=limit, since=args.get("since")).to_dict()
    if doc["total"] > len(doc["runs"]):
        doc["left_out"] = doc["total"] - len(doc["runs"])
        doc["note"] = (f"showing {len(doc['runs'])} of {doc['total']} runs; "
                       f"{doc['left_out']} left out: raise limit, pass since, or add words")
    return scrub_doc(doc)


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
