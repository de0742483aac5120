"""A prepared run: a request that passed every check before spend, with all it needs to run.

It knows its resolved models, the variables it will read (:attr:`key_vars`, their values
taken from the environment of the process that prepared it: :attr:`keys`), its run id and its
account (what it may spend, under which id). :attr:`plan` is what runs: a ``WaveSpec``, a
council's plan, a bench's. It may hold what the preparing process must keep until the run
ends (a retry's claim on its wave family): use it as a context manager, or :meth:`close` it.

``orchestrator.app.wire.to_wire`` is its plain-JSON form for a process that runs it (the
daemon), which rebuilds it with ``from_wire``; the keys travel beside it, never inside.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from orchestrator.keys import RunKeys


@dataclass
class Allowance:
    """The run's account as a prepared run states it (plain values, sent to a daemon): what
    a run may spend and under which id the ledger counts it: each run ceiling it
    holds (a plugin's declared option, the cost_ceiling plugin's ``max_cost``), and for a
    retry what its wave family has left of them."""

    run_id: str
    ceilings: dict[str, float | None] = field(default_factory=dict)
    family: dict[str, dict[str, Any]] = field(default_factory=dict)
    # a retry's: what its family's account opens from (engine/retry.open_family_account),
    # in the process that runs it; else the run opens its own (orchestrator/account)
    of_family: dict[str, Any] = field(default_factory=dict)

    def open(self):
        """The run's live account (orchestrator.account.Account), or None: its own."""
        if not self.of_family:
            return None
        from orchestrator.engine.retry import open_family_account

        return open_family_account(self.of_family)


@dataclass
class Prepared:
    request: Any  # the request it came from (orchestrator.app.requests)
    kind: str  # what runs: "wave", "deliberation", "council", "bench"
    run_id: str
    models: list[Any]  # every model it may call (ResolvedModel), chairs and retried legs too
    key_vars: frozenset[str]  # the variables it reads (orchestrator.keys)
    account: Allowance
    plan: Any  # WaveSpec | CouncilPlan | BenchPlan (app/wire.py carries each)
    keys: RunKeys = field(default_factory=RunKeys)
    notices: list[str] = field(default_factory=list)  # said once, as it starts
    nothing: str | None = None  # nothing to run (a retry of a wave with no failed leg): why
    unfit_for_daemon: str | None = None  # why it must run in the process that prepared it
    pm: Any = None  # this process's plugin manager for it (never sent)
    config: Any = None
    resources: ExitStack = field(default_factory=ExitStack)
    # a face shows the legs' text as it arrives (a single answer on a terminal, orch ui's
    # live page): only then do legs ask for a stream. Streaming costs CPU per chunk in litellm
    # (docs/performance.md, "Streaming"), so a run nobody watches is read whole.
    watch_text: bool = False

    @property
    def single_answer(self) -> bool:
        """One leg and no chair: that leg's answer is the run's output, so a face may show
        it as it streams (``orch fanout`` prints it on stdout as it arrives)."""
        plan = self.plan
        return (self.kind == "wave" and len(getattr(plan, "models", None) or ()) == 1
                and getattr(plan, "chair", None) is None
                and not getattr(getattr(self, "request", None), "aggregate", None))

    def close(self) -> None:
        self.resources.close()

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
