"""A follow-up: a second prompt to the same legs of a finished wave, each with its own
conversation so far, as a new wave linked to its parent (``options.continues``).

It is a fanout like any other: the request goes through :func:`orchestrator.app.prepare`
(models, keys, budgets, the briefing's intake checks, the workspace) before any spend; only
then is each leg given its history, ``[user: the parent's briefing, assistant: its answer]``
after the parent's own history when the parent was itself a follow-up. ``orch ui``'s
follow-up box calls it; ``orch fanout --continue`` (issue 43 item 3) is the same operation,
so the lead may fold the two into one at merge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import UsageProblem

MAX_DEPTH = 50  # follow-ups of follow-ups: the chain read back to its first wave


def _runs(runs_dir: str | None) -> Path:
    from orchestrator import config as config_mod

    return Path(runs_dir) if runs_dir else config_mod.runs_dir()


def _wave(runs: Path, wave_id: str) -> dict[str, Any]:
    from orchestrator.engine.rebuild import load_wave
    from orchestrator.errors import OrchError

    try:
        return load_wave(runs, wave_id)
    except OrchError:
        raise UsageProblem(f"no wave {wave_id} under {runs}; pick one from `orch runs`") from None


def conversations(runs: Path, wave_id: str) -> tuple[list[str], list[list[dict[str, Any]]]]:
    """The wave's leg models and, per leg, its conversation through its answer (the turns a
    follow-up sends before its new prompt); a leg with no answer cannot be followed up."""
    doc = _wave(runs, wave_id)
    if doc.get("kind") == "deliberation" or doc.get("status") == "running":
        raise UsageProblem(f"wave {wave_id} is {'a deliberation' if doc.get('kind') == 'deliberation' else 'still running'}: "
                           "follow up a finished one-round wave")
    legs = doc.get("legs") or []
    missing = [leg.get("leg_id") for leg in legs if not leg.get("answer")]
    if not legs or missing:
        raise UsageProblem(f"wave {wave_id} has legs without an answer ({', '.join(map(str, missing)) or 'none'}); "
                           "retry them first (`orch fanout --retry-failed`)")
    briefing = (runs / doc["wave_id"] / "briefing.md").read_text(encoding="utf-8")
    before: list[list[dict[str, Any]]] = [[] for _ in legs]
    parent = (doc.get("options") or {}).get("continues")
    if parent:
        depth = int((doc.get("options") or {}).get("continue_depth") or 1)
        if depth >= MAX_DEPTH:
            raise UsageProblem(f"wave {wave_id} is {depth} follow-ups deep; start a new wave")
        _, before = conversations(runs, parent)
    models = [str(leg["model"]) for leg in legs]
    return models, [[*before[n], {"role": "user", "content": briefing},
                     {"role": "assistant", "content": str(leg["answer"])}]
                    for n, leg in enumerate(legs)]


def follow_up(parent: str, prompt: str, *, runs_dir: str | None = None, **common: Any):
    """The prepared follow-up of wave ``parent`` (a :class:`~orchestrator.app.prepared.
    Prepared`, run with :func:`orchestrator.app.start.start`): ``prompt`` to each of its
    legs' models with that leg's conversation; ``common``: the request's other fields
    (workspace, tag, timeout_min, ...). Every check of :func:`orchestrator.app.prepare`
    applies, before any spend."""
    from orchestrator.app.prepare import prepare
    from orchestrator.app.requests import Fanout

    runs = _runs(runs_dir)
    models, histories = conversations(runs, parent)
    doc = _wave(runs, parent)
    depth = int((doc.get("options") or {}).get("continue_depth") or 0) + 1
    prepared = prepare(Fanout(prompt=prompt, prompt_source="the follow-up",
                              models=",".join(models), runs_dir=runs_dir, **common))
    spec = prepared.plan
    spec.histories = histories
    spec.options = {**spec.options, "continues": doc["wave_id"], "continue_depth": depth}
    return prepared
