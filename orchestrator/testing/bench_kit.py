"""The testing kit's bench: one task and one contestant written as a bench file the way a
user writes one (docs/bench.md), and :class:`BenchResult`, what ``orch.run_trial`` /
``orch.run_bench`` ran. The trial runs through the bench's own trial skeleton
(bakeoff/trial.py) and check: a plugin is tested where a bench puts it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.testing.scripted_server import RecordedRequest

__all__ = ["BenchResult", "write_bench"]


def _toml(value: Any) -> str:
    """A TOML value: JSON's strings, numbers, booleans and arrays are TOML's too."""
    return json.dumps(value)


def write_bench(folder: Path, tasks: list[dict[str, Any]],
                contestants: list[dict[str, Any]], trials: int = 1,
                **settings: Any) -> Path:
    """``folder/bench.toml`` and a task file per task (``folder/tasks/<id>.json``): each
    task a dict as in a task file (``id``, ``task``, ``expect`` or ``verify``, ...), each
    contestant as in ``[[contestants]]``; ``settings``: more ``[bench]`` keys."""
    cases = folder / "tasks"
    cases.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        (cases / f"{task['id']}.json").write_text(json.dumps(task), encoding="utf-8")
    lines = ["[bench]", 'cases = "tasks"', f"trials = {int(trials)}", "jobs = 1",
             *(f"{k} = {_toml(v)}" for k, v in settings.items())]
    for c in contestants:
        lines += ["", "[[contestants]]", *(f"{k} = {_toml(v)}" for k, v in c.items())]
    path = folder / "bench.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class BenchResult:
    """What a bench ran: its results document (``doc``: ``trials``, ``stats``, ...), its
    file, its events and the requests on the wire."""

    doc: dict[str, Any]
    path: Path
    requests: list[RecordedRequest]
    events: list[Any]
    exit_code: int

    @property
    def trials(self) -> list[dict[str, Any]]:
        """Every trial's row: ``task``, ``contestant``, ``passed``, ``answer``, ``check``,
        ``excluded``, ``leg_id`` ..."""
        return self.doc["trials"]

    @property
    def trial(self) -> dict[str, Any]:
        """The first (often only) trial's row."""
        return self.doc["trials"][0]

    @property
    def passed(self) -> bool:
        """Every trial passed (none excluded, none failed)."""
        return bool(self.trials) and all(r["passed"] and not r["excluded"]
                                         for r in self.trials)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]
