"""The spend ledger's table and vocabulary: what a row is, shared by the ledger, its queries and
its migrations (``orchestrator/ledger/migrations``, which own the DDL on every backend)."""

from __future__ import annotations

import getpass
import os
import socket
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from orchestrator.ledger.in_flight import IN_FLIGHT as _IN_FLIGHT

# The one vocabulary of a row's status and the source of its cost (docs/spend.md). The ledger
# refuses any other value at write time: a typo would otherwise fall out of every rollup.
STATUSES = ("complete", "error", "refused", "aborted")
COST_SOURCES = (
    "priced",  # litellm's price map x the reported tokens
    "declared",  # the provider's declared prices x the reported tokens
    "free",  # a provider declared with both prices 0
    "reported",  # the provider or a bench command reported the dollars itself
    "suspect",  # usage was impossible (negative, beyond any window) and was clamped
    "unknown",  # no price known: cost_usd is null, never guessed
    "none",  # no answer arrived, so nothing was reported: 0 tokens, $0
)
GROUP_BY = ("model", "day", "wave", "tag", "status", "kind", "user", "host", "round")
# A deliberation's round is in its rows' wave id, ``<run_id>-round-<N>`` (no column of its own:
# docs/spend.md); a row of anything else has no round.
ROUND_INFIX = "-round-"

# The newest migration (orchestrator/ledger/migrations/versions). A ledger at this revision opens
# without importing Alembic; tests/test_ledger_migrations.py checks it is Alembic's head.
HEAD = "0007"


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Stored as naive UTC on every backend, read back as aware UTC: no local-time surprises."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None else None


class SpendRow(SQLModel, table=True):
    """One model call's usage and cost, written when the call ends however it ended."""

    __tablename__ = "spend"
    __table_args__ = (sa.Index("ux_spend_leg", "wave_id", "leg_id", unique=True,
                               sqlite_where=sa.text("seq IS NOT NULL"),
                               postgresql_where=sa.text("seq IS NOT NULL")),)

    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
    wave_id: str = Field(index=True)
    leg_id: str
    kind: str  # leg | chair | seat | judge | bench | ...
    model: str  # canonical model name, e.g. "myvllm/qwen3-8b@hot"
    provider: str
    status: str  # one of STATUSES
    reason: str | None = Field(default=None, sa_type=sa.Text)
    finish_reason: str | None = None
    input_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    output_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    reasoning_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    cached_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    cost_usd: float | None = None  # None = unknown, never guessed
    cost_source: str = "unknown"  # one of COST_SOURCES
    duration_s: float = 0.0
    tag: str | None = None
    project_dir: str | None = Field(default=None, sa_type=sa.Text)
    run_id: str | None = Field(default=None, index=True)  # a council run id
    # a follow-up's: the wave its wave continues (orch fanout --continue; 0007)
    parent_wave_id: str | None = Field(default=None, index=True)
    user: str | None = Field(default=None, index=True)  # ORCH_USER, else the OS user
    host: str | None = None  # the machine that made the call
    # How many billed requests of the leg the row holds (1, 2, ...): a leg's row is made at
    # its first billed request and updated in place as the next ones are billed, never
    # moved back (ledger_durable.py). Null on rows written whole (before 0003, plugins).
    seq: int | None = None
    # The most the leg can have cost when some answer's cost could not be read from its
    # usage: read costs plus each such answer's claim (its worst case as sent). Null when
    # every cost was read (0005).
    cost_bound_usd: float | None = None


TABLE: sa.Table = SpendRow.__table__  # type: ignore[attr-defined]
COLUMNS = frozenset(c.name for c in TABLE.columns) - {"id"}
REQUIRED = ("wave_id", "leg_id", "kind", "model", "provider", "status")
DEFAULTS: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0,
                            "cached_tokens": 0, "cost_source": "unknown", "duration_s": 0.0}
# The unique key of rows that carry a sequence: one row per leg, a replay, a retried write or
# a second host can only move it forward (Ledger.append_many; migrations/versions/0003).
LEG_KEY = ("wave_id", "leg_id")
LEG_KEY_WHERE = sa.text("seq IS NOT NULL")
IN_FLIGHT = _IN_FLIGHT  # what a leg's durable row says while the leg runs
TOKENS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")


# --- who and where ------------------------------------------------------------------------------

def user() -> str:
    """``ORCH_USER`` (a team's name for a person), else the OS user; never empty."""
    from orchestrator import keys

    named = (keys.setting("ORCH_USER") or "").strip()  # a run's own, under orch serve
    if named:
        return named[:200]
    try:
        return getpass.getuser() or f"uid-{os.getuid()}"
    except (KeyError, OSError):  # a uid without a passwd entry (containers)
        return f"uid-{os.getuid()}"


def host() -> str:
    return socket.gethostname() or "unknown"


def stamp(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with ``user`` and ``host`` filled where the caller left them empty: stamped
    where the call was made, so a replay elsewhere cannot take the credit."""
    from orchestrator.security.secrets import scrub_values  # a key in $USER stays out of the outbox

    out = dict(row)
    if not out.get("user"):
        out["user"] = scrub_values(user())
    if not out.get("host"):
        out["host"] = scrub_values(host())
    return out


def storable(text: str) -> str:
    """Text every backend takes: PostgreSQL refuses NUL bytes, and no driver encodes a lone
    surrogate (an undecodable byte in an environment variable). A row refused for either
    would wait in the outbox for ever."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
