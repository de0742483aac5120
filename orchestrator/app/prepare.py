"""``prepare(request)``: every check before spend, for any request (orchestrator/app/
requests.py), and the prepared run (app/prepared.py) that :func:`orchestrator.app.start.start`
runs. Every face calls this one function."""

from __future__ import annotations

from orchestrator.app.requests import Bench, BenchResume, Continue, Council, Fanout, Retry


def prepare(request):
    """The prepared run of ``request``, or a one-line ``OrchError`` (``UsageProblem``: exit 2)
    saying what stops it; nothing has been spent either way."""
    if isinstance(request, Fanout):
        from orchestrator.app.wave import prepare_fanout

        return prepare_fanout(request)
    if isinstance(request, Retry):
        from orchestrator.app.wave import prepare_retry

        return prepare_retry(request)
    if isinstance(request, Continue):
        from orchestrator.app.continuation import prepare_continue

        return prepare_continue(request)
    if isinstance(request, Council):
        from orchestrator.app.council import prepare_council

        return prepare_council(request)
    if isinstance(request, Bench | BenchResume):
        from orchestrator.app.bench import prepare_bench

        return prepare_bench(request)
    raise TypeError(f"not a request: {type(request).__name__}")
