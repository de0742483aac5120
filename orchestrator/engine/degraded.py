"""What a wave's budgets make of its exit code: work a budget stopped is never a clean run.

The engine knows only what every budget shares: a leg that ended on a budget (``finished:
false``) and a launch a ``before_launch`` hook refused (``budget_refusals``). What a plugin's
own limit means (the cost ceiling's spend past ``over_ceiling_usd``, a total that is only a
floor) is the plugin's to say, in its ``wave_report`` answer: its reasons are appended to
the wave document's ``degraded`` and its fields set on the document. Any reason makes the
wave exit 2, even when every leg that ran completed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.engine.record import LegRecord

# (the document so far) -> [(plugin name, its wave_report answer)]; failures are the
# caller's to record (a wave notice).
Reporter = Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]

# What the engine writes itself: a plugin's report may not replace it.
OWN_FIELDS = frozenset({
    "wave_id", "status", "exit_code", "legs", "chair", "usage", "cost_usd", "cost_exact",
    "runs_dir", "signal", "options", "notices", "budget_refusals", "degraded",
    "artifact_errors",
})


def degradations(records: list[LegRecord], doc: dict[str, Any]) -> list[str]:
    """The engine's own reasons: legs a budget stopped, launches a budget refused."""
    reasons = []
    unfinished = [r.leg_id for r in records if r.extra.get("finished") is False]
    if unfinished:
        reasons.append(f"stopped on a budget before finishing: {', '.join(unfinished)}")
    refusals = doc.get("budget_refusals") or []
    if refusals:
        reasons.append(f"{len(refusals)} launch(es) refused by a budget")
    return reasons


def reporter(hooks: Any, notice: Callable[[str], None], wave: Any = None) -> Reporter:
    """Ask ``hooks`` (a HookRunner) for every ``wave_report``; a plugin's failure is a
    ``notice``, never the document's end. A ``FAIL_CLOSED`` plugin's failure is also a
    reason: what it would have said is unknown, so the wave is not a clean run."""
    def report(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        failed: list[tuple[str, dict[str, Any]]] = []

        def on_error(plugin: str, hook: str, exc: BaseException) -> None:
            from orchestrator.plugin_host.boundary import said

            line = said(exc)
            notice(f"plugin {plugin} failed in {hook}: {line}")
            if any(i.plugin == plugin and i.fail_closed for i in hooks.impls(hook)):
                failed.append((plugin, {"degraded": [
                    f"plugin {plugin} failed in {hook} ({line}); it is fail-closed, so the "
                    "wave is not a clean run"]}))

        answers = hooks.collect_sync("wave_report", on_error, wave=wave, doc=doc)
        return answers + failed

    return report


def merge_reports(doc: dict[str, Any], reports: list[tuple[str, dict[str, Any]]],
                  notice: Callable[[str], None]) -> list[str]:
    """Set each report's fields on ``doc`` and return every reason, in plugin order. A field
    the engine writes itself is not replaced: it is skipped with a notice."""
    reasons: list[str] = []
    for plugin, report in reports:
        for name, value in (report.get("fields") or {}).items():
            if name in OWN_FIELDS:
                notice(f"plugin {plugin}'s wave_report set {name!r}, a field orch writes "
                       "itself; ignored")
                continue
            doc[name] = value
        reasons.extend(report.get("degraded") or [])
    return reasons
