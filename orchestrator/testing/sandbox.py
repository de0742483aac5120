"""Bench tests where bubblewrap cannot run (a CI container without user namespaces): the flag
that lets `orch bench` run its checks and command contestants unconfined there, so a test of
something else (grading, interrupts, the ledger) still runs. Tests of the confinement itself
skip instead (tests/test_bench_sandbox.py)."""

from __future__ import annotations


def unsafe_unless_confined() -> list[str]:
    """``["--unsafe-checks"]`` where bwrap cannot confine, else nothing."""
    from orchestrator.sandbox import bwrap

    return ["--unsafe-checks"] if bwrap.usable() else []
