"""The daemon's own environment: an allow-list, the same on both start paths.

A warm daemon lives for hours and serves every terminal of its user; whatever its process
environment holds is readable in ``/proc/PID/environ`` for its whole life. So it starts with
only what it needs to find its files, plugins and runtime directory, never a key. An
allow-list, not a deny-list of secret-looking names: a declared provider's ``--api-key-env``
can be called anything (``ACME_CRED``), and a ``DATABASE_URL`` or a proxy URL holds a
password in its value. A run's keys come from its client, with the prepared run: exactly
the variables it declared (orchestrator/keys.py; the ledger's URL among them). A value that
is a URL keeps its user but loses its password (``ORCH_LEDGER_URL``: the daemon warms its
ledger with what it may know).

Standard library only: ``orch serve start`` and the auto-start run on the client's path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ALLOWED = frozenset({
    # finding programs, files and the user
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP", "TZ", "TERM",
    "LANG", "LANGUAGE", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
    "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
    # orch's own settings (which plugins load is part of what a client checks it shares)
    "ORCH_HOME", "ORCH_DATA_HOME", "ORCH_RUNS_DIR", "ORCH_OUTBOX_DIR", "ORCH_PLUGINS",
    "ORCH_DISABLE_PLUGINS", "ORCH_PLUGINS_DIR", "ORCH_DAEMON", "ORCH_USER", "ORCH_LOG_JSON",
    "ORCH_PG_BINDIR",
    "ORCH_HOOK_DEADLINE_S", "ORCH_LEDGER_URL", "LOG_LEVEL",
    # litellm's offline switches, read at its import
    "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_MODE", "LITELLM_OFFLINE_MODE", "LITELLM_LOG",
    "LITELLM_DONT_SHOW_FEEDBACK_BOX",
    # reaching a provider from this machine: certificates and proxies
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
    "no_proxy", "all_proxy",
})
ALLOWED_PREFIXES = ("LC_",)
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*):[^/@\s]*@")


def allowed(name: str) -> bool:
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)


def daemon_environment(environ: Mapping[str, str], **extra: str) -> dict[str, str]:
    """The allowed variables of ``environ``, URL passwords dropped, then ``extra`` (the
    start path's own: the inherited lock's descriptor, the starter's pid)."""
    env = {name: _URL_PASSWORD.sub(r"\1@", value) for name, value in environ.items()
           if allowed(name)}
    env.update(extra)
    return env


def start_clean(internal: tuple[str, ...], argv: list[str]) -> None:
    """In ``python -m orchestrator.daemon serve`` run by hand (systemd, a container, a
    shell): start again with the allowed environment when this one holds more.
    ``/proc/PID/environ`` shows the environment the process started with, whatever
    ``os.environ`` says later, so the only way to not hold a key is to not start with one.
    ``internal``: the start path's own variables, kept."""
    import os
    import sys

    kept = {name: os.environ[name] for name in internal if name in os.environ}
    clean = daemon_environment(os.environ, **kept)
    if clean != dict(os.environ):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "orchestrator.daemon", *argv], clean)
