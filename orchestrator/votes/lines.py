"""The vote as the terminal says it: the outcome (majority, plurality, tie, none), the count,
the legs holding the winner, and the rule that broke a tie. Plain lines: the face prints
them."""

from __future__ import annotations

from typing import Any


def vote_lines(aggregate: dict[str, Any] | None) -> list[str]:
    if not aggregate:
        return []
    n, legs = aggregate["answers"], aggregate.get("of_legs", aggregate["answers"])
    win = aggregate.get("winner")
    answered = f"{n} of {legs} legs answered" if n != legs else f"{n} answers"
    if win is None:
        return [f"Vote: no answer to count ({answered})"]
    holders = ", ".join(win["models"])
    others = [g["votes"] for g in aggregate["groups"][1:]]
    rest = f" (the others: {', '.join(map(str, others))})" if others else ""
    outcome = aggregate["outcome"]
    if outcome == "majority":
        head = f"Vote: majority, {win['votes']} of {answered}{rest}"
    elif outcome == "plurality":
        head = f"Vote: no majority; the most, {win['votes']} of {answered}{rest}"
    else:
        tied = len(aggregate["tied_with"]) + 1
        head = (f"Vote: tie, {tied} answers with {win['votes']} each of {answered}; broken by "
                f"{aggregate['tie_break']}")
    return [f"{head}: the answer of {holders}"]
