"""A wave's leg limits (``leg_limits`` in wave.json): each leg's time limit and the requests
it may make, as the run used them (``--timeout``, ``--max-steps``). Recorded so a retry of
the wave (``--retry-failed``) and a follow-up (``--continue``) run on the limits the user
set rather than the defaults; read back only through :func:`kept`, which checks them: a
wave.json is a file anyone can edit, and a limit not as orch writes it is refused in one
line, never used (tests/test_leg_limits.py holds the readers to this one)."""

from __future__ import annotations

from typing import Any

from orchestrator.errors import OrchError

FIELD = "leg_limits"
MOST_STEPS = 200  # `--max-steps` takes 1..200
MOST_SECONDS = 7 * 24 * 60 * 60  # `--timeout` takes up to a week


def record(timeout_s: float, max_steps: int) -> dict[str, Any]:
    """What wave.json says of the limits the wave's legs ran under."""
    return {"timeout_s": timeout_s, "max_steps": max_steps}


def kept(doc: dict[str, Any], wave_id: str, *, timeout_min: float | None,
         max_steps: int | None) -> tuple[float | None, int | None]:
    """The limits a retry or a follow-up of the wave ``doc`` runs with, as (minutes, steps):
    each one given now wins; else the wave's own as recorded; None where neither says (a
    wave recorded before the limits were: the default). A recorded value that would be kept
    but is not as orch writes it (not a number, negative, NaN, past the flag's range) is
    refused: an ``OrchError`` naming it and the fix, before anything is sent."""
    if timeout_min is not None and max_steps is not None:
        return timeout_min, max_steps
    limits = doc.get(FIELD)
    if limits is None:
        return timeout_min, max_steps
    if not isinstance(limits, dict):
        raise _refused(wave_id, FIELD, limits, "an object of timeout_s and max_steps",
                       "--timeout MINUTES --max-steps N")
    if timeout_min is None and "timeout_s" in limits:
        seconds = limits["timeout_s"]
        if not _within(seconds, _number(seconds), min=0, min_open=True, max=MOST_SECONDS):
            raise _refused(wave_id, f"{FIELD}.timeout_s", seconds,
                           f"seconds above 0, at most {MOST_SECONDS}", "--timeout MINUTES")
        timeout_min = seconds / 60
    if max_steps is None and "max_steps" in limits:
        steps = limits["max_steps"]
        if not _within(steps, _number(steps) and isinstance(steps, int), whole=True, min=1,
                       max=MOST_STEPS):
            raise _refused(wave_id, f"{FIELD}.max_steps", steps,
                           f"a whole number from 1 to {MOST_STEPS}", "--max-steps N")
        max_steps = steps
    return timeout_min, max_steps


def _number(value: Any) -> bool:
    """A JSON number as orch writes one (never text, never a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _within(value: Any, written: bool, **bounds: Any) -> bool:
    """Whether a recorded value is as orch writes it: of the written kind (``written``), and
    finite within ``bounds`` by the one check of a number (orchestrator/option_values.py)."""
    from orchestrator.option_values import BadValue, number

    if not written:
        return False
    try:
        number(value, **bounds)
    except BadValue:
        return False
    return True


def _refused(wave_id: str, name: str, value: Any, wanted: str, flag: str) -> OrchError:
    # a number is shown; anything else by its kind only: a record's text is never echoed
    shown = repr(value) if value is None or _number(value) or isinstance(value, bool) \
        else f"a {type(value).__name__}"
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return OrchError(f"wave {wave_id}'s wave.json records {name} = {shown}, not as orch "
                     f"writes it ({wanted}); restore it, or give the limit now: {flag}")
