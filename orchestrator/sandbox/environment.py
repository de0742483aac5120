"""The environment an untrusted program gets: the few variables programs need to run, and
only the ones it declared besides. orch's own environment holds provider keys; none of it is
passed on unless named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from orchestrator import keys

# what tools need to find programs and print text; never a key
BASE = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM",
        "PYTHONPATH", "SYSTEMROOT")
RUN_VARIABLES = (*BASE, "HOME")  # what a run with untrusted programs declares it reads


def confined(*, declared: Mapping[str, str] | None = None, passed: Iterable[str] = (),
             home: str | None = None) -> dict[str, str]:
    """``BASE`` from the run's environment, the names in ``passed`` (values taken from the
    run's variables: the contestant asked for them), then ``declared`` (values given in
    bench.toml). ``home`` replaces HOME (the real one is hidden inside the sandbox)."""
    env = {k: v for k in BASE if (v := keys.setting(k)) is not None}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = home or keys.setting("HOME") or "/"
    for name in passed:  # from the run's variables (orchestrator.keys): a bench declares them
        value = keys.read(name)
        if value is not None:
            env[name] = value
    env.update(declared or {})
    return env
