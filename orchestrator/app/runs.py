"""Past runs as every face lists them: ``orch runs`` and ``orch status``, and `orch mcp`'s
runs tool (the files under the runs directory and the bench directory, read by
``orchestrator.operations.runs``)."""

from __future__ import annotations

from pathlib import Path

from orchestrator import config as config_mod
from orchestrator.errors import OrchError, UsageProblem

STATUSES = ("running", "complete", "partial", "error", "aborted", "interrupted", "unreadable")


def _bench_dir() -> Path:
    return config_mod.home() / "bench"  # where `orch bench` saves its results


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
    found = [e for e in runs_mod.entries(runs_dir or config_mod.runs_dir(), _bench_dir())
             if (not wanted or e.status in wanted) and (after is None or e.created >= after)]
    found.sort(key=lambda e: e.created, reverse=True)
    return found


def shown(runs_dir: Path | None, run_id: str | None):
    """One run and its document, as `orch runs show` (and `orch mcp`'s runs tool) reads it;
    ``run_id`` None: the latest."""
    from orchestrator.operations import runs as runs_mod

    base = runs_dir or config_mod.runs_dir()
    entry = (runs_mod.latest(base, _bench_dir()) if run_id is None
             else runs_mod.find(base, run_id, _bench_dir()))
    return entry, runs_mod.document(base, entry)
