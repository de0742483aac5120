"""The plugins a run loads, chosen from outside the run: the testing kit's isolation.

A test of one plugin must not depend on what else is installed, and must reach every path a
real run takes (``prepare``, ``start``, a bench's per-contestant managers). Rather than
build each manager itself, the kit says once which plugins to load and every
:func:`~orchestrator.plugin_host.plugins.load` of the run honours it: the one place plugins
are loaded stays the one place they are chosen. Outside a :func:`choosing` block nothing
changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    """``extra``: ``(name, plugin)`` pairs registered in-process; ``builtins``: orch's own
    plugins load; ``third_party``: installed and plugins-folder plugins load too."""

    extra: tuple[tuple[str, object], ...] = ()
    builtins: bool = True
    third_party: bool = False


_CHOICE: ContextVar[Choice | None] = ContextVar("orch_plugin_choice", default=None)


def current() -> Choice | None:
    return _CHOICE.get()


@contextmanager
def choosing(choice: Choice) -> Iterator[Choice]:
    """Every plugin manager built inside the block (and the runs it starts) follows
    ``choice``. A manager built before it and cached (``orchestrator.runtime``) is its
    holder's to drop: the testing kit drops it on the way in and out."""
    token = _CHOICE.set(choice)
    try:
        yield choice
    finally:
        _CHOICE.reset(token)
