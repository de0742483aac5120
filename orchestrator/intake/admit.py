"""Admitting a request: every message passes the intake before the request goes on the wire.

``models/server.py`` sends only an :class:`Admitted` request, and only :func:`admit` makes
one: no text reaches a provider without passing :func:`admit_text` (the credential-content
scan, the secret registry, and, where the run is anonymous, the anonymity rules), whatever
built it — a leg's briefing, its own history, a tool result, a plugin's ``before_request``
note, a chair packet, a judge's bundle, a round prompt.

A long conversation is not rescanned at every step: each message's content is remembered,
per policy, with what admitting it gave (the registry's version is in the key, so a key
registered later is still masked).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import Refusal
from orchestrator.intake.anonymity import Anonymity
from orchestrator.request import Request

MEMO_SIZE = 2048  # messages remembered per policy (a wave's legs share one)
ANONYMITY_CODE = "ANONYMITY"


@dataclass(frozen=True)
class Admission:
    """One text as it may be sent, and what the intake did to it."""

    text: str
    withheld: tuple[str, ...] = ()  # credential-content rules that fired
    redacted: int = 0  # identifying spellings replaced
    leaks: tuple[str, ...] = ()  # identifying spellings still there: the request must stop


class Leaked(Refusal):
    """An anonymous request still names a participant: it is not sent."""

    def __init__(self, spellings: Iterable[str]) -> None:
        self.spellings = sorted(set(spellings))
        super().__init__(ANONYMITY_CODE, f"the request still names a participant "
                         f"({len(self.spellings)} spelling(s)); it was not sent")


@dataclass
class Policy:
    """What every request of a wave's legs must pass. The credential rules and the secret
    registry always; ``anonymity`` when the readers must not learn who wrote what (a
    council's judges, a deliberation's later rounds)."""

    anonymity: Anonymity | None = None
    _memo: dict[tuple[Any, ...], Admission] = field(default_factory=dict, repr=False)

    def text(self, text: str, *, anonymous: bool = True) -> Admission:
        """``text`` admitted (remembered): ``anonymous`` False for a text the anonymity
        rules do not apply to (a tool result, the model's own turn, a system prompt)."""
        from orchestrator.security.secrets import registry

        scope = anonymous and self.anonymity is not None
        key = (text, scope, registry().version)
        found = self._memo.get(key)
        if found is None:
            found = admit_text(text, self.anonymity if scope else None)
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = found
            # what was admitted passes unchanged next time (a tool result the leg admitted
            # before it became a message)
            if not found.leaks:
                self._memo[(found.text, scope, registry().version)] = Admission(found.text)
        return found


    def passed(self, text: str, *, anonymous: bool = True) -> None:
        """Remember ``text`` as admitted as it is: made of admitted text and orch's own
        words (a tool result with its withheld note), it is not scanned again."""
        from orchestrator.security.secrets import registry

        self._memo[(text, anonymous and self.anonymity is not None,
                    registry().version)] = Admission(text)


def admit_text(text: str, anonymity: Anonymity | None = None) -> Admission:
    """The one intake of a text: registered key values masked, credential content withheld
    (``[withheld: RULE]``), and, given ``anonymity``, identifying spellings redacted and
    the leak scan run on the result."""
    from orchestrator.security.credential_content import withhold
    from orchestrator.security.secrets import scrub_values

    out = scrub_values(text)
    withheld = withhold(out)
    out = withheld.text
    redacted, leaks = 0, ()
    if anonymity is not None:
        out, redacted = anonymity.redact(out)
        leaks = tuple(anonymity.leaks(out))
    return Admission(out, tuple(withheld.rules), redacted, leaks)


class Admitted:
    """A request every message of which passed the intake; made only by :func:`admit`."""

    __slots__ = ("request", "withheld", "redacted")

    def __init__(self, request: Request, withheld: dict[str, int], redacted: int, *,
                 _by: object = None) -> None:
        if _by is not _ADMIT:
            raise TypeError("an Admitted request is made by orchestrator.intake.admit only")
        self.request, self.withheld, self.redacted = request, withheld, redacted


_ADMIT = object()
# Roles whose text the anonymity rules read: what the run composed for the reader. A tool
# result (the workspace's own files), the model's own turns and a system prompt are not a
# participant's words about itself.
ANONYMOUS_ROLES = frozenset({"user"})


def admit(request: Request, policy: Policy) -> Admitted:
    """``request`` with every message admitted under ``policy``, or :class:`Leaked`."""
    messages: list[dict[str, Any]] = []
    withheld: dict[str, int] = {}
    redacted = 0
    leaks: list[str] = []
    changed = False
    for message in request.messages:
        if not isinstance(message, dict):
            messages.append(message)
            continue
        anonymous = message.get("role") in ANONYMOUS_ROLES
        content = message.get("content")
        if isinstance(content, str):
            got = policy.text(content, anonymous=anonymous)
            admitted: Any = got.text
            results = [got]
        elif isinstance(content, list):
            admitted, results = _parts(content, policy, anonymous)
        else:
            messages.append(message)
            continue
        for got in results:
            for rule in got.withheld:
                withheld[rule] = withheld.get(rule, 0) + 1
            redacted += got.redacted
            leaks += got.leaks
        if admitted != content:
            changed = True
            message = {**message, "content": admitted}
        messages.append(message)
    if leaks:
        raise Leaked(leaks)
    out = request.evolve(messages=messages) if changed else request
    return Admitted(out, withheld, redacted, _by=_ADMIT)


def _parts(parts: list[Any], policy: Policy, anonymous: bool) -> tuple[list[Any], list[Admission]]:
    """A content list (``[{"type": "text", "text": ...}, ...]``): each text part admitted."""
    out, results, changed = [], [], False
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            got = policy.text(part["text"], anonymous=anonymous)
            results.append(got)
            if got.text != part["text"]:
                part, changed = {**part, "text": got.text}, True
        out.append(part)
    return (out if changed else parts), results
