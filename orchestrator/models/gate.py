"""The rate-limit gate: where a fanout meets the provider's limits.

One key often serves every model of a wave, so 64 legs that each retry a 429 on their own
turn one limit into a storm of retries. Instead every request to one endpoint (and key) goes
through one :class:`Gate`, shared by all legs of the process:

- it starts open at ``max_concurrent`` (config; unset, 16 or the wave's leg count, whichever
  is larger), so a healthy wave is never slowed by it;
- on a 429 that waiting can fix, *every* caller pauses for ``Retry-After`` (plus jitter), or
  an exponential backoff up to 60 s when the provider names no wait, and the gate halves;
  it adds one back after every 3 successes, up to the ceiling (AIMD, as TCP does);
- not retried: quota, billing or spend-cap errors (reason ``quota``; they arrive as 429s
  too), an abort (cancellation), a requested wait over 120 s, a seventh retry.

The SDK's own retries are off (``max_retries=0``) while the gate is on, so nothing retries
twice. The gate keeps no secret: it is keyed by a hash of the key, and named by endpoint.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from orchestrator.errors import ProviderError

T = TypeVar("T")

DEFAULT_MAX_CONCURRENT = 16
MAX_WAIT_S = 120.0  # a provider asking for a longer wait is not waited out
BACKOFF_CAP_S = 60.0
BACKOFF_BASE_S = 1.0
MAX_RETRIES = 6  # the seventh retry is not made
INCREASE_EVERY = 3  # successes per +1 of the limit


@dataclass
class Hold:
    """A pause the gate imposed on every caller of one endpoint."""

    endpoint: str
    at: float  # time.time() when it started
    seconds: float  # how long it asked every caller to wait
    retry_after: float | None  # what the provider asked for (None: backoff)
    limit: int  # the concurrency limit after this 429
    ceiling: int  # the limit the gate started at


HoldSink = Callable[[Hold], None]


class _Waiter:
    """A caller waiting for a slot, on the event loop (and thread) it waits in."""

    def __init__(self) -> None:
        import asyncio

        self.event = anyio.Event()
        self.thread = threading.get_ident()
        self.loop = asyncio.get_running_loop()

    def set(self) -> None:
        if threading.get_ident() == self.thread:
            self.event.set()
            return
        try:  # another client's wave released the slot (orch serve)
            self.loop.call_soon_threadsafe(self.event.set)
        except RuntimeError:  # that loop has closed: its wave is over
            pass


@dataclass
class Gate:
    endpoint: str  # for people: the endpoint only, never the key
    ceiling: int = DEFAULT_MAX_CONCURRENT
    limit: int = 0
    in_flight: int = 0
    paused_until: float = 0.0  # time.monotonic()
    epoch: int = 0  # bumped at every halving: one halving per burst of 429s
    successes: int = 0
    rate_limited: int = 0  # 429s seen
    retries: int = 0
    halvings: int = 0
    lowest: int = 0
    _waiters: list[_Waiter] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.limit = self.limit or self.ceiling
        self.lowest = self.lowest or self.limit

    def set_ceiling(self, ceiling: int) -> None:
        """A new ceiling (config, or a larger wave); a limit no 429 has lowered moves with it."""
        untouched = self.limit >= self.ceiling
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling if untouched else min(self.limit, self.ceiling)

    # -- slots ---------------------------------------------------------------------------
    # ``orch serve`` shares one gate between clients whose waves run on their own event
    # loops (one thread each): slots are counted under a lock, and a waiter on another
    # loop is woken through that loop.
    async def _acquire(self) -> int:
        while True:
            wait = self.paused_until - time.monotonic()
            if wait > 0:
                await anyio.sleep(wait)
                continue
            with self._lock:
                if self.in_flight < self.limit:
                    self.in_flight += 1
                    return self.epoch
                waiter = _Waiter()
                self._waiters.append(waiter)
            try:
                await waiter.event.wait()
            finally:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.set()

    def _release(self) -> None:
        with self._lock:
            self.in_flight -= 1
        self._wake()

    # -- the call ------------------------------------------------------------------------
    async def call(self, send: Callable[[], Awaitable[T]], on_hold: HoldSink | None = None) -> T:
        """``send()`` through the gate: wait for a slot, retry what waiting can fix."""
        attempt = 0
        while True:
            epoch = await self._acquire()
            try:
                result = await send()
            except ProviderError as exc:
                hold = self._after_429(exc, attempt, epoch)
                if hold is None:
                    raise
                attempt += 1
                self.retries += 1
                if on_hold is not None:
                    on_hold(hold)
                continue
            else:
                self._after_success()
                return result
            finally:
                self._release()

    def _after_success(self) -> None:
        self.successes += 1
        if self.successes >= INCREASE_EVERY and self.limit < self.ceiling:
            self.limit += 1
            self.successes = 0
            self._wake()

    def _after_429(self, exc: ProviderError, attempt: int, epoch: int) -> Hold | None:
        """The pause to impose for ``exc``, or None when it is not to be retried."""
        if exc.reason not in ("rate_limited", "overloaded"):
            return None  # quota, auth, context... waiting fixes none of them
        self.rate_limited += 1
        asked = exc.retry_after
        if asked is not None and asked > MAX_WAIT_S:
            exc.message += (f" (the provider asked to wait {asked:g} s: over the "
                            f"{MAX_WAIT_S:g} s orch waits)")
            return None
        if attempt >= MAX_RETRIES:
            exc.message += f" (gave up after {MAX_RETRIES} retries)"
            return None
        base = asked if asked is not None else min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)
        seconds = base + random.uniform(0, min(1.0, 0.1 * base + 0.05))
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)
        if epoch == self.epoch:  # sent under the current limit: this burst halves it once
            self.limit = max(1, self.limit // 2)
            self.lowest = min(self.lowest, self.limit)
            self.epoch += 1
            self.halvings += 1
        self.successes = 0
        return Hold(self.endpoint, time.time(), seconds, asked, self.limit, self.ceiling)


# -- one gate per endpoint and key, for the whole process ------------------------------------
_GATES: dict[tuple[str, str], Gate] = {}


def endpoint_of(model: Any) -> str:
    """Where a model's requests go: the declared base URL (without credentials or query),
    else the provider's name."""
    if not model.api_base:
        return model.provider
    from urllib.parse import urlsplit

    from orchestrator.security.secrets import scrub_values as scrub  # a URL is an identifier

    url = urlsplit(model.api_base)
    host = url.hostname or ""
    port = f":{url.port}" if url.port else ""
    return scrub(f"{url.scheme}://{host}{port}{url.path}".rstrip("/")) if host else \
        scrub(model.api_base)


def max_concurrent(model: Any, config: Any = None, wave_size: int = 0) -> int:
    """``providers.<id>.max_concurrent``, else ``defaults.max_concurrent``, else 16 — or the
    wave's leg count when that is larger: an unconfigured gate must not hold a healthy
    64-leg wave to 16 in flight (measured: 2.5x slower with no 429 at all)."""
    if config is None:
        from orchestrator import runtime

        config = runtime.config()
    declared = config.providers.get(model.provider, {}) if model.declared else {}
    value = declared.get("max_concurrent") or config.defaults.get("max_concurrent")
    unset = max(DEFAULT_MAX_CONCURRENT, wave_size)
    try:
        return max(1, int(value)) if value else unset
    except (TypeError, ValueError):
        return unset


def gate_for(model: Any, config: Any = None, wave_size: int = 0) -> Gate:
    endpoint = endpoint_of(model)
    key = model.api_key() or model.api_key_env or ""
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:12]
    ceiling = max_concurrent(model, config, wave_size)
    gate = _GATES.get((endpoint, fingerprint))
    if gate is None:
        gate = _GATES[(endpoint, fingerprint)] = Gate(endpoint, ceiling)
    elif gate.ceiling != ceiling:
        gate.set_ceiling(ceiling)
    return gate


def reset() -> None:
    """Forget every gate (tests and benchmarks that want a fresh start)."""
    _GATES.clear()


class HoldLog:
    """What one wave's calls were held back: union of the pauses, per endpoint, for the
    wave's Notice and ``wave.json``."""

    def __init__(self) -> None:
        self.endpoints: dict[str, dict[str, Any]] = {}
        self._until: dict[str, float] = {}

    def __call__(self, hold: Hold) -> None:
        now = time.monotonic()
        entry = self.endpoints.setdefault(hold.endpoint, {
            "first_at": hold.at, "held_s": 0.0, "holds": 0, "retries": 0,
            "lowest_limit": hold.limit, "ceiling": hold.ceiling})
        until = now + hold.seconds
        current = self._until.get(hold.endpoint, 0.0)
        if current <= now:  # a new pause
            entry["holds"] += 1
            entry["held_s"] += hold.seconds
            from orchestrator.runtime import log

            log().warning("rate_limit_hold", endpoint=hold.endpoint,
                          seconds=round(hold.seconds, 2), retry_after=hold.retry_after,
                          limit=hold.limit)
        else:  # extends the pause under way
            entry["held_s"] += max(0.0, until - current)
        self._until[hold.endpoint] = max(current, until)
        entry["retries"] += 1
        entry["lowest_limit"] = min(entry["lowest_limit"], hold.limit)

    def to_dict(self) -> dict[str, Any]:
        return {endpoint: {**entry, "held_s": round(entry["held_s"], 3),
                           "first_at": _clock(entry["first_at"])}
                for endpoint, entry in self.endpoints.items()}

    def notices(self) -> list[str]:
        return [f"rate limit: {endpoint} answered 429; the wave was held back "
                f"{entry['held_s']:.1f} s in {entry['holds']} pause(s) from "
                f"{_clock(entry['first_at'])}, {entry['retries']} request(s) retried, "
                f"concurrency lowered to {entry['lowest_limit']} of {entry['ceiling']}"
                for endpoint, entry in self.endpoints.items()]


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
