"""Where a plugin's hook runs, and what a council seat or a deliberation round said: the
plugin's view of orch's modes (docs/plugins.md, "Councils, deliberations and bench trials").

Every mode runs its work as waves, so a plugin's hooks are the same in each; these say which
wave a hook is in (a council's stage, a deliberation's round, a bench trial) and read an
answer the way orch reads it. Each is a thin facade: the keys and the readers are the
core's own (council/run.py, council/findings.py, deliberation/run.py, deliberation/reply.py),
imported when called, so importing this module costs a plugin nothing.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["bench_trial", "council_run", "council_stage", "deliberation_round", "round_reply",
           "seat_findings"]


class HasOptions(Protocol):
    """A ``LegContext`` or a ``WaveContext``: anything with the wave's ``options``."""

    options: dict[str, Any]


def council_stage(ctx: HasOptions) -> str | None:
    """The council stage this leg or wave is (``review``, ``review-retry``, ``repair``,
    ``judge``, ``chair-1``, ...), or None outside a council."""
    from orchestrator.council.run import STAGE_KEY

    return ctx.options.get(STAGE_KEY)


def council_run(ctx: HasOptions) -> str | None:
    """The council's run id (its folder is ``runs/council-<id>``), or None outside one."""
    from orchestrator.council.run import RUN_KEY

    return ctx.options.get(RUN_KEY)


def deliberation_round(ctx: HasOptions) -> int | None:
    """The deliberation round this leg or wave is (1: the plain fanout; 2 on: legs reading
    their peers), or None outside a deliberation."""
    from orchestrator.deliberation.run import ROUND_KEY, RUN_KEY

    return ctx.options.get(ROUND_KEY) if RUN_KEY in ctx.options else None


def bench_trial(leg: Any) -> bool:
    """Whether ``leg`` is a model contestant's bench trial (its folder is the trial's
    workspace, its answer is graded by the task's check)."""
    from orchestrator.bakeoff.run import TRIAL_KIND

    return getattr(leg, "kind", None) == TRIAL_KIND


def seat_findings(answer: str) -> list[dict[str, Any]] | None:
    """A council seat's findings as orch reads them from its answer's findings block
    (``claim``, ``severity``, ``location``, ``rationale``, ``local_id``), or None when the
    block cannot be read (orch then asks the seat to repair it)."""
    from orchestrator.council.findings import extract

    return extract(answer).findings


def round_reply(answer: str) -> dict[str, Any] | None:
    """A later deliberation round's reply block as orch reads it (``decision``: keep,
    revise or adopt; ``vote``: the label voted for or ``none``; ``reason``), or None when
    the reply has no readable block."""
    from orchestrator.deliberation.reply import payload

    data, _, _, problem = payload(answer or "")
    return data if not problem and isinstance(data, dict) else None
