"""Every test runs offline, in a temporary ORCH_HOME (fixtures from orchestrator.testing)."""

import os
import tempfile

os.environ.update({
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_MODE": "PRODUCTION",
    # a test without the orch_home fixture still never reads or writes the user's own
    # ~/.config/orch (its ledger, its providers): one fresh home for the session
    "ORCH_HOME": tempfile.mkdtemp(prefix="orch-suite-home-"),
})


def pytest_sessionfinish(session, exitstatus):
    """No daemon outlives the suite: an `orch serve` still running under this session's tmp
    directory (started by a test by hand or by `daemon: auto`) is named, stopped, and fails
    the session."""
    import signal
    import sys

    factory = getattr(session.config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)
    if base is None or not sys.platform.startswith("linux"):
        return
    from orchestrator.testing.daemon import serve_processes

    leaked = serve_processes(base)
    for pid in leaked:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    if leaked:
        print(f"\nleaked `orch serve` processes (stopped now): {leaked}", file=sys.stderr)
        session.exitstatus = 1
