"""Numbers and inputs the CLI takes, checked as usage errors (exit 2) before anything runs,
by the one check every face shares (orchestrator/option_values.py).

``float("nan")`` and ``float("inf")`` parse, and click's ranges let NaN through (every
comparison with it is false): a cost ceiling of ``nan`` would be no ceiling at all.
"""

from __future__ import annotations

import click

from orchestrator.option_values import BadValue, checked, number


class FiniteFloat(click.ParamType):
    """A finite number, at least ``min`` (above it when ``min_open``), at most ``max``."""

    name = "number"

    def __init__(self, min: float | None = None, *, min_open: bool = False,  # noqa: A002
                 max: float | None = None) -> None:  # noqa: A002
        self.min, self.min_open, self.max = min, min_open, max

    def convert(self, value, param, ctx):
        try:
            return number(value, min=self.min, min_open=self.min_open, max=self.max)
        except BadValue as exc:
            self.fail(exc.problem, param, ctx)


class Declared(click.ParamType):
    """A plugin's declared option (orchestrator.options.Option) with a value: an int, a float
    or text, checked by :func:`orchestrator.option_values.checked` as ``orch mcp`` and
    ``orch ui`` check it."""

    def __init__(self, option) -> None:
        self.option = option
        self.name = {"int": "integer", "float": "number"}.get(option.type, "text")

    def convert(self, value, param, ctx):
        try:
            return checked(self.option, value)
        except BadValue as exc:
            self.fail(exc.problem, param, ctx)


class DeclaredChoice(click.Choice):
    """A declared choice: listed in ``--help`` and completed as click's, checked by
    :func:`orchestrator.option_values.checked`."""

    def __init__(self, option) -> None:
        super().__init__(option.choices)
        self.option = option

    def convert(self, value, param, ctx):
        try:
            return checked(self.option, value)
        except BadValue as exc:
            self.fail(exc.problem, param, ctx)
