"""What ``--retry-failed`` inherits: the legs to run again, the ceiling that is left, and the
answers its chair reads.

A wave and its retries (and their retries) are one *family*: their root is the wave that is
no retry. The family shares the root's cost ceiling: a retry gets what the whole family has
not spent. The chair of a retry reads every complete answer of the retried wave and of the
waves it retried, so a second chair call never misses the first answers; a chair that failed
is retried even when every leg completed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.engine.record import COMPLETE, LegRecord
from orchestrator.errors import OrchError
from orchestrator.store import read_json


@dataclass
class RetryPlan:
    wave: dict[str, Any]  # the document of the wave being retried
    models: list[str]  # the failed legs' models, in order
    chair: bool  # whether the retry calls the chair
    prior: list[LegRecord] = field(default_factory=list)  # complete answers the chair reads
    ceiling: dict[str, Any] | None = None  # {"root", "ceiling", "spent", "left"}

    @property
    def empty(self) -> bool:
        return not self.models and not self.chair


def _parents(runs_dir: Path) -> dict[str, str | None]:
    """wave id -> the wave it retried, for every wave under ``runs_dir``."""
    parents = {}
    for path in runs_dir.glob("*/wave.json"):
        try:
            parents[path.parent.name] = read_json(path).get("retry_of")
        except Exception:
            continue
    return parents


def _root(wave_id: str, parents: dict[str, str | None]) -> str:
    seen = {wave_id}
    while parents.get(wave_id):
        wave_id = parents[wave_id]
        if wave_id in seen:  # a hand-edited loop: stop rather than spin
            break
        seen.add(wave_id)
    return wave_id


def plan_retry(runs_dir: Path, wave_id: str, *, chair_model: str | None = None,
               max_cost_given: bool = False) -> RetryPlan:
    from orchestrator.engine.rebuild import load_wave

    doc = load_wave(runs_dir, wave_id)
    models = [leg["model"] for leg in doc["legs"] if leg["status"] != COMPLETE]
    old_chair = doc.get("chair")
    chair = bool(chair_model or doc.get("chair_model")) and (
        bool(models) or old_chair is None or old_chair.get("status") != COMPLETE)
    plan = RetryPlan(wave=doc, models=models, chair=chair)
    parents = _parents(runs_dir)
    parents.setdefault(wave_id, doc.get("retry_of"))
    # The chair reads the complete answers of this wave and of every wave it retried.
    current: str | None = wave_id
    seen: set[str] = set()
    while current and current not in seen:
        seen.add(current)
        ancestor = doc if current == wave_id else load_wave(runs_dir, current)
        plan.prior += [LegRecord.from_dict(leg) for leg in ancestor["legs"]
                       if leg["status"] == COMPLETE]
        current = parents.get(current)
    if not max_cost_given:
        plan.ceiling = _family_ceiling(runs_dir, wave_id, parents)
    return plan


def _family_ceiling(runs_dir: Path, wave_id: str,
                    parents: dict[str, str | None]) -> dict[str, Any] | None:
    """The root's ceiling and what the whole family spent, or None when it had none."""
    from orchestrator.engine.rebuild import load_wave

    root = _root(wave_id, parents)
    ceiling = (load_wave(runs_dir, root).get("options") or {}).get("max_cost")
    if ceiling is None:
        return None
    family = [w for w in parents if _root(w, parents) == root]
    spent = sum(load_wave(runs_dir, w).get("cost_usd") or 0.0 for w in family)
    left = round(float(ceiling) - spent, 10)
    if left <= 0:
        raise OrchError(f"wave {root} and its retries spent ${spent:.4f} of their "
                        f"${float(ceiling):g} ceiling: nothing is left for a retry; pass "
                        "--max-cost USD to set a ceiling for this retry alone")
    return {"root": root, "ceiling": float(ceiling), "spent": round(spent, 10), "left": left}
