"""Runs as every face lists them: ``orch runs`` and ``orch status``, `orch mcp`'s runs tool
(and ``orch ui``'s runs page, through the same listing): the files under the runs directory
and the bench directory, read by :mod:`orchestrator.operations.runs`."""

from __future__ import annotations

from pathlib import Path

from orchestrator import config as config_mod
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.operations.run_summary import STATUSES

__all__ = ["STATUSES", "bench_dir", "cache_dir", "listed", "shown"]


def bench_dir() -> Path:
    return config_mod.home() / "bench"  # where `orch bench` saves its results


def cache_dir() -> Path:
    return config_mod.home() / "cache"  # the listing's summaries, kept between commands


def _moment(option: str, text: str):
    from orchestrator.ledger.spend import parse_since

    try:
        return parse_since(text)
    except OrchError as exc:  # a usage mistake stays one (exit 2)
        raise type(exc)(str(exc).replace("--since", option)) from None


def _statuses(values: tuple[str, ...]) -> set[str]:
    wanted = {s.strip() for v in values for s in v.split(",") if s.strip()}
    unknown = wanted - set(STATUSES)
    if unknown:
        raise UsageProblem(f"--status {', '.join(sorted(unknown))} is not a status; choose "
                           f"from {', '.join(STATUSES)}")
    return wanted


def listed(runs_dir: Path | None, since: str | None, status) -> list:
    """The runs `orch runs` lists (and `orch mcp`'s runs tool), newest first."""
    from orchestrator.operations import runs as runs_mod

    wanted = _statuses(tuple(status))
    after = _moment("--since", since) if since else None
    return [e for e in runs_mod.entries(runs_dir or config_mod.runs_dir(), bench_dir(),
                                        cache_dir())
            if (not wanted or e.status in wanted) and (after is None or e.created >= after)]


def shown(runs_dir: Path | None, run_id: str | None):
    """One run and its document, as `orch runs show` (and `orch mcp`'s runs tool) reads it;
    ``run_id`` None: the latest."""
    from orchestrator.operations import runs as runs_mod

    base = runs_dir or config_mod.runs_dir()
    entry = (runs_mod.latest(base, bench_dir(), cache_dir()) if run_id is None
             else runs_mod.find(base, run_id, bench_dir(), cache_dir()))
    doc = runs_mod.document(base, entry)
    if entry.kind == "wave" and isinstance(doc, dict):  # its follow-ups (--continue)
        doc = {**doc, "continued_by": runs_mod.children(
            runs_mod.entries(base, bench_dir(), cache_dir()), entry.id)}
    return entry, doc
