"""One account per run: what the run has spent and claimed, opened from the ledger.

Whatever spends under a run id — a wave, a retry, a council's stages, a deliberation's
rounds, a bench and its resumes, from any face — spends through one :class:`Account`, shared
by every wave of the run in this process. It opens from the durable record
(``account/held.py``: the ledger's rows of the run and its family, the outbox's, and the
requests a killed process left in flight), never from a settings file, so a resumed or
retried run starts where the money is. Then it holds, live:

- every leg of the run in this process: its known cost, or its bound when some answer's
  cost could not be read (that answer at its claim: unknown is not zero);
- each running leg's **open claim**: the most its request in flight can cost, made before
  it is sent (the engine claims every request; ``account/claims.py``) and dropped when its
  answer is billed.

``committed()`` is their sum: what a ceiling has lost. The run's ceilings (``ceilings``, by
option key) are a plugin's to enforce (the cost_ceiling plugin compares ``committed()`` with
its ceiling); the core hands each wave what the run has left of each (``left``) and a
bench's launches wait here for open claims to settle (``changed``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import anyio

from orchestrator.account import claims
from orchestrator.account.held import Held


class Account:
    def __init__(self, run_id: str | None = None, ceilings: dict[str, Any] | None = None,
                 prior: Held | None = None, *, waits: bool = False) -> None:
        self.run_id = run_id
        self.ceilings = {k: float(v) for k, v in (ceilings or {}).items() if v is not None}
        self.prior = prior or Held()
        self.waits = waits  # a launch only open claims keep out waits for them (a bench)
        self.lock = threading.RLock()  # a check and its claim happen at once
        self.legs: dict[str, Any] = {}  # leg id -> LegContext, every leg launched here
        self.claims: dict[str, float] = {}  # leg id -> its open claim
        # (wave id, model) -> the safety factor learned in that wave (claims.py)
        self.factors: dict[tuple[str, str], float] = {}
        self.version = 0  # bumped whenever a claim settles or a leg ends
        self._event: anyio.Event | None = None

    @classmethod
    def open(cls, run_id: str | None = None, ceilings: dict[str, Any] | None = None, *,
             waves: Iterable[str] = (), url: str | None = None,
             files: dict[str, float] | None = None, skip_providers: tuple[str, ...] = (),
             sink=None, waits: bool = False) -> Account:
        """The account of ``run_id`` (and ``waves``, its family) as the record holds it,
        read within ``sink``'s ledger deadline (a LedgerSink). A ledger that cannot be read
        leaves the outbox, the request journal and ``files`` as the record, said once on
        stderr (in-flight requests its rows might settle then count at their claims)."""
        from orchestrator.account.held import read

        def held(ledger: bool = True) -> Held:
            return read(url, run_id=run_id, waves=waves, files=files,
                        skip_providers=skip_providers, ledger=ledger)

        try:
            prior = sink.bounded(held, "answer") if sink is not None else held()
        except Exception:  # noqa: BLE001 - the ledger did not answer in time: the rest of it
            prior = held(ledger=False)
            prior.unreadable = prior.unreadable or "it did not answer in time"
        if prior.unreadable:
            from orchestrator.runtime import log

            log().warning("account_without_ledger", run_id=run_id or "", why=prior.unreadable,
                          held=f"${prior.total:.4f}", note="the ledger could not be read: the "
                          "account holds what the outbox, the request journal and the run's "
                          "own files say")
        return cls(run_id, ceilings, prior, waits=waits)

    # -- what is held ------------------------------------------------------------------
    @staticmethod
    def spent(leg) -> float:
        """What one leg holds once its requests are answered: its bound when some answer's
        cost was not read, else its known cost (unknown, with no price: nothing)."""
        record = leg.record
        if record.cost_bound_usd is not None:
            return float(record.cost_bound_usd)
        return float(record.cost_usd or 0.0)

    def committed(self, exclude: str | None = None, *, claims_too: bool = True) -> float:
        """What the run holds: the record's before this process, each leg's spend, and the
        open claims of running legs (but ``exclude``'s; none with ``claims_too`` False)."""
        with self.lock:
            total = self.prior.total
            for leg_id, leg in self.legs.items():
                total += self.spent(leg)
                if claims_too and leg.record.ended_at is None and leg_id != exclude:
                    total += self.claims.get(leg_id, 0.0)
            return total

    def others_claim(self, leg_id: str) -> bool:
        """Whether a running leg other than ``leg_id`` holds an open claim (one that will
        settle: waiting for it can free room)."""
        with self.lock:
            return any(amount > 0 and lid != leg_id and self.legs[lid].record.ended_at is None
                       for lid, amount in self.claims.items() if lid in self.legs)

    def left(self, key: str) -> float | None:
        """What the run's ceiling ``key`` has left now (None: the run has no such ceiling)."""
        from orchestrator.run_ceiling import left

        ceiling = self.ceilings.get(key)
        return None if ceiling is None else left(ceiling, self.committed())

    def unbounded(self) -> int:
        """Legs (of the record and of this process) whose cost is unknown with no bound."""
        here = sum(1 for leg in self.legs.values() if leg.record.cost_usd is None
                   and leg.record.cost_bound_usd is None)
        return self.prior.unknown_legs + here

    # -- claims --------------------------------------------------------------------------
    def join(self, leg) -> None:
        """A leg of the run is about to launch here."""
        with self.lock:
            self.legs[leg.leg_id] = leg

    def factor(self, leg) -> float:
        """The safety factor of ``leg``'s model, learned from the answers of its wave."""
        return self.factors.get((leg.wave_id, leg.model.name), 1.0)

    def worst_case(self, leg, messages: list, tools: list | None,
                   params: dict[str, Any] | None, budget: int | None = None) -> float | None:
        """The most such a request of ``leg`` can cost (None: no price)."""
        return claims.worst_case(leg, messages, tools, params, self.factor(leg), budget)

    def claim(self, leg, amount: float | None) -> None:
        """``leg``'s open claim is now ``amount`` (None: it holds none)."""
        with self.lock:
            self.legs.setdefault(leg.leg_id, leg)
            if amount is None:
                self.claims.pop(leg.leg_id, None)
            else:
                self.claims[leg.leg_id] = amount
        self._bump()

    def claim_request(self, leg, request) -> float | None:
        """Claim ``request`` as it goes on the wire (what the cost ceiling checked, when one
        is set); its claim, for the journal and the answer's bound."""
        amount = self.worst_case(leg, request.messages, request.tools, request.params)
        self.claim(leg, amount)
        return amount

    def settle(self, leg, response) -> None:
        """``response`` was billed on ``leg``'s record: its claim is dropped (what could not
        be read is already on the record's bound) and the provider's count teaches the
        next claims."""
        with self.lock:
            self.claims.pop(leg.leg_id, None)
            factors = {leg.model.name: self.factor(leg)}
            claims.learn(leg, response.usage, response.usage_note is not None, factors)
            self.factors[(leg.wave_id, leg.model.name)] = factors[leg.model.name]
        self._bump()

    def ended(self, leg) -> None:
        """``leg`` ended: whatever it claimed is released."""
        with self.lock:
            self.claims.pop(leg.leg_id, None)
        self._bump()

    # -- waiting -------------------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1
        event, self._event = self._event, None
        if event is not None:
            event.set()

    async def changed(self, since: int) -> None:
        """Return once a claim settled or a leg ended after ``version`` was ``since``."""
        while self.version == since:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
