"""The few exceptions the engine and CLI understand by name."""

from __future__ import annotations


class OrchError(Exception):
    """A problem the user can fix: printed as one line, exit code 1, no traceback."""

    exit_code = 1


class UsageProblem(OrchError):
    """Arguments that do not make a run (``--models ,,,``, a status that does not exist): one
    line, exit 2. Raised by the application layer, which names no face's error type."""

    exit_code = 2


class PreflightError(OrchError):
    """Options that cannot work with the models asked for, found before any spend: one
    line, exit 2 (a usage error)."""

    exit_code = 2


class _Coded:
    """A named code and a message; the leg's reason reads ``"<code>: <message>"``."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.message}"


class Refusal(_Coded, Exception):  # noqa: N818 - it is a refusal, not an error
    """Raised by a plugin to refuse a request: nothing is sent, the leg ends `refused`.

    ``code`` is a short upper-case name (``OUTPUT_STARVATION``); the leg's reason becomes
    ``"<code>: <message>"``.
    """


class Deferred(Refusal):
    """A ``before_launch`` refusal that only what other legs have *claimed* causes: once their
    requests are answered (each claim settles with its answer) the launch may fit. A run
    whose account waits for claims (a bench) tries the launch again when one settles; any
    other run refuses it as a :class:`Refusal`."""


class LegError(_Coded, OrchError):
    """Raised by a plugin after a response to end the leg ``error`` (e.g. ``OUTPUT_LENGTH``):
    the request was sent and billed, so it is not a refusal. The leg's reason becomes
    ``"<code>: <message>"``. It subclasses OrchError so the hook runner passes it through
    to the engine instead of isolating it as a plugin failure."""


class ProviderError(Exception):
    """A model call failed; ``reason`` is one of REASONS, ``message`` keeps the provider's words."""

    REASONS = (
        "rate_limited",
        "quota",  # a 429 that waiting cannot fix: quota, billing, spend cap
        "overloaded",  # the provider is busy for everyone (Anthropic's 529): wait and retry
        "context_overflow",
        "auth",
        "timeout",
        "server_error",
        "bad_request",
        "connection",
        "not_found",
        "bad_response",  # an answer that is not a chat completion (garbage, no choices)
        "budget_exceeded",  # a gateway refused: this key's (team's, user's) budget is spent
        "model_not_allowed",  # a gateway refused: this key may not use this model
    )

    def __init__(self, reason: str, message: str, status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.status = status
        self.retry_after = retry_after
