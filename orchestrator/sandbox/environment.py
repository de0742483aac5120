"""The environment an untrusted program gets: the few variables programs need to run, and
only the ones it declared besides. orch's own environment holds provider keys; none of it is
passed on unless named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# what tools need to find programs and print text; never a key
BASE = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM",
        "PYTHONPATH", "SYSTEMROOT")


def confined(*, declared: Mapping[str, str] | None = None, passed: Iterable[str] = (),
             home: str | None = None) -> dict[str, str]:
    """``BASE`` from orch's environment, the names in ``passed`` (values taken from orch's
    environment: the contestant asked for them), then ``declared`` (values given in
    bench.toml). ``home`` replaces HOME (the real one is hidden inside the sandbox)."""
    env = {k: os.environ[k] for k in BASE if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = home or os.environ.get("HOME", "/")
    for name in passed:
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(declared or {})
    return env
