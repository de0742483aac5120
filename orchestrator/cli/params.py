"""Numbers and inputs the CLI takes, checked as usage errors (exit 2) before anything runs.

``float("nan")`` and ``float("inf")`` parse, and click's ranges let NaN through (every
comparison with it is false): a cost ceiling of ``nan`` would be no ceiling at all.
"""

from __future__ import annotations

import math

import click


class FiniteFloat(click.ParamType):
    """A finite number, at least ``min`` (above it when ``min_open``), at most ``max``."""

    name = "number"

    def __init__(self, min: float | None = None, *, min_open: bool = False,  # noqa: A002
                 max: float | None = None) -> None:  # noqa: A002
        self.min, self.min_open, self.max = min, min_open, max

    def convert(self, value, param, ctx):
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number; give a plain number like 2.5",
                      param, ctx)
        if self.min is not None and (number < self.min or (self.min_open
                                                           and number == self.min)):
            bound = f"more than {self.min:g}" if self.min_open else f"at least {self.min:g}"
            self.fail(f"{value!r} must be {bound}", param, ctx)
        if self.max is not None and number > self.max:
            self.fail(f"{value!r} must be at most {self.max:g}", param, ctx)
        return number
