"""The key variables a run reads, and the one way to read them.

A prepared run declares the variables it will read (its models' keys, the settings litellm
needs for them, a plugin's own ``KEY_VARIABLES``) and takes their values from the
environment of the process that prepared it, once (:func:`capture`); under ``orch serve``
that is the client's, which sends exactly these. While the run runs (:func:`using`), every
reader asks :func:`read`: a declared name gets its value, any other none, in-process and in
the daemon alike. Outside a run (``orch doctor``, ``orch models``) :func:`read` is the
process's environment. A value read is registered as a secret: it never leaves in text.

Plugins read their own key this way (``from orchestrator.keys import read``) and declare
its name on the module: ``KEY_VARIABLES = ("MY_SERVICE_KEY",)`` (docs/plugins.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from orchestrator.security.secrets import register


class RunKeys(Mapping[str, str]):
    """A run's variables by name: only the declared ones that were set."""

    def __init__(self, values: Mapping[str, str] | None = None,
                 declared: Iterable[str] = (), settings: Iterable[str] = ()) -> None:
        self._values = {k: v for k, v in (values or {}).items() if isinstance(v, str) and v}
        self.declared = frozenset(declared) | frozenset(self._values)
        self.settings = frozenset(settings)  # no secret: a path, a user name, PATH
        for name, value in self._values.items():
            if name not in self.settings:
                register(value, f"${name}")

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:  # names only: a value never reaches a log or a traceback
        return f"RunKeys({sorted(self._values)})"

    def values_for_wire(self) -> dict[str, str]:
        """The values, to hand to the process that runs this run (the daemon)."""
        return dict(self._values)


def capture(names: Iterable[str], environ: Mapping[str, str] | None = None,
            settings: Iterable[str] = ()) -> RunKeys:
    """The values of ``names`` in ``environ`` (default: this process's environment);
    ``settings``: those of them that are no secret (not registered as one)."""
    environ = os.environ if environ is None else environ
    names = sorted(set(names))
    return RunKeys({n: environ[n] for n in names if environ.get(n)}, declared=names,
                   settings=settings)


_current: ContextVar[RunKeys | None] = ContextVar("orch_run_keys", default=None)


@contextmanager
def using(keys: RunKeys):
    """Run the code inside with ``keys`` as its variables (threads that copy the context,
    anyio's worker threads and orch's tool threads, see them too)."""
    token = _current.set(keys)
    try:
        yield keys
    finally:
        _current.reset(token)


def current() -> RunKeys | None:
    return _current.get()


def read(name: str | None) -> str | None:
    """The value of variable ``name`` for the run in progress (None: not declared, or not
    set); outside a run, this process's environment. Registered as a secret when read."""
    if not name:
        return None
    keys = _current.get()
    value = keys.get(name) if keys is not None else os.environ.get(name)
    register(value, f"${name}")
    return value


def setting(name: str) -> str | None:
    """A variable the run declared that is no secret (``PATH`` for a bench's programs): its
    value like :func:`read`, not registered."""
    keys = _current.get()
    return keys.get(name) if keys is not None else os.environ.get(name)


def is_set(name: str | None) -> bool:
    """Whether ``name`` has a value (for the run in progress, else this process), read
    without taking the value."""
    return bool(name) and bool(view().get(name))


def view() -> Mapping[str, str]:
    """Every variable the run in progress holds (outside a run: the environment), to read
    names against (a key check) without reading them one by one."""
    keys = _current.get()
    return keys if keys is not None else os.environ
