"""pytest fixtures for orch and its plugins (registered through the ``pytest11`` entry point).

``orch_home``: a temporary ORCH_HOME, litellm kept offline, ``ORCH_DAEMON=manual`` (no run
starts a daemon by itself; a test that wants one starts it). ``scripted_server``: the scripted
OpenAI-compatible server on 127.0.0.1. ``orch``: an :class:`~orchestrator.testing.kit.OrchKit`
bound to both, with ``run_wave``/``run_leg`` that return the requests on the wire.
``ledger_url``: each test that uses it runs twice, on a SQLite ledger and on a fresh database
of a real PostgreSQL server (``pg_cluster``, one per session; skipped, saying why, when this
machine has no PostgreSQL). Kept light: nothing heavy is imported until a fixture is used.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config):
    """litellm reads its offline switches at import: set them (unless the user did) before
    any test can import it, so no test session phones home or loads a .env file."""
    from orchestrator.testing.kit import OFFLINE_ENV

    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    # no run of a test starts a daemon that outlives it; a daemon a test starts is still used
    os.environ["ORCH_DAEMON"] = "manual"
    config.addinivalue_line(
        "markers", "refused_before_the_daemon: with both_ways, the command fails while it is "
        "prepared in the client, so its daemon variant proves no word reached the daemon")


@pytest.fixture(autouse=True)
def _secrets_as_at_start():
    """Each test ends with the secret registry as it began: in orch one process is one run,
    and values left by earlier tests (hypothesis registers hundreds) would make every later
    scrub walk them all, and mask text that is no secret of this test."""
    from orchestrator.security import secrets

    saved = secrets.registry().snapshot()
    yield
    secrets.registry().restore(saved)


@pytest.fixture(autouse=True)
def _plugins_dir_as_at_start():
    """Each test ends with ORCH_PLUGINS_DIR as it began: ``--plugins-dir`` sets it in the
    process (so a daemon and plugins see it), and a command run in-process (CliRunner) must
    not leave its folder to every later test."""
    saved = os.environ.get("ORCH_PLUGINS_DIR")
    yield
    if saved is None:
        os.environ.pop("ORCH_PLUGINS_DIR", None)
    else:
        os.environ["ORCH_PLUGINS_DIR"] = saved


@pytest.fixture
def orch_home(tmp_path, monkeypatch):
    from orchestrator import runtime
    from orchestrator.testing.kit import OFFLINE_ENV

    home = tmp_path / "orch-home"
    home.mkdir()
    monkeypatch.setenv("ORCH_HOME", str(home))
    monkeypatch.setenv("ORCH_DATA_HOME", str(tmp_path / "orch-data"))  # models, binaries
    monkeypatch.delenv("ORCH_RUNS_DIR", raising=False)
    monkeypatch.delenv("ORCH_LEDGER_URL", raising=False)
    # the ledger outbox's fallback directory: inside the test's own tmp, never shared /tmp
    monkeypatch.setenv("ORCH_OUTBOX_DIR", str(tmp_path / "outbox-fallback"))
    monkeypatch.delenv("ORCH_PLUGINS", raising=False)
    monkeypatch.delenv("ORCH_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("ORCH_PLUGINS_DIR", raising=False)  # ORCH_HOME/plugins, empty
    monkeypatch.setenv("ORCH_DAEMON", "manual")  # a test starts its daemon itself (both_ways)
    for key, value in OFFLINE_ENV.items():
        monkeypatch.setenv(key, value)
    runtime.config.cache_clear()
    runtime.plugin_manager.cache_clear()
    yield home
    runtime.config.cache_clear()
    runtime.plugin_manager.cache_clear()
    runtime.configure_logging.cache_clear()  # a -q run's quiet ends with its test
    import logging

    level = os.environ.get("LOG_LEVEL", "warning").upper()
    logging.getLogger().setLevel(getattr(logging, level, logging.WARNING))


@pytest.fixture
def scripted_server():
    from orchestrator.testing.scripted_server import ScriptedServer

    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def orch(orch_home, scripted_server):
    from orchestrator.testing.kit import OrchKit

    return OrchKit(home=orch_home, server=scripted_server)


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL server for the session (orchestrator.testing.postgres)."""
    from orchestrator.testing import postgres

    why = postgres.unavailable()
    if why and os.environ.get("ORCH_TEST_POSTGRES") == "require":  # .ci/run found binaries
        pytest.fail(f"PostgreSQL ledger tests: {why}")
    if why:
        pytest.skip(f"PostgreSQL ledger tests: {why}")
    cluster = postgres.Cluster()
    yield cluster
    cluster.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, orch_home, monkeypatch):
    """The ledger URL this test runs on, also set as ORCH_LEDGER_URL (subprocesses inherit it):
    ORCH_HOME's SQLite file, or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{orch_home / 'ledger.db'}"
    else:
        url = request.getfixturevalue("pg_cluster").new_database()
    monkeypatch.setenv("ORCH_LEDGER_URL", url)
    yield url
    from orchestrator.ledger import connection as ledger_engine

    ledger_engine.dispose_all()  # no idle connection outlives its test database


@pytest.fixture(params=["in-process", "daemon"])
def both_ways(request, orch_home, tmp_path, monkeypatch):
    """Run the test twice: CLI calls through ``orchestrator.testing.daemon.invoke`` go
    in-process, then to a warm ``orch serve`` on a socket in a temporary XDG_RUNTIME_DIR
    (each run prepared in the client; a test marked ``refused_before_the_daemon`` holds that
    none reached the daemon)."""
    if request.param == "in-process":
        yield "in-process"
        return
    from orchestrator.testing.daemon import daemon_in_thread

    run = tmp_path / "xdg-run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    with daemon_in_thread() as daemon:
        yield "daemon"
        if request.node.get_closest_marker("refused_before_the_daemon"):
            assert not daemon.served, "a run refused while prepared reached the daemon"
        else:
            assert daemon.served, "no command of this test reached the daemon"
