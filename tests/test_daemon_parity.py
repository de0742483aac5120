"""What failed only through the daemon, proven both ways: in-process, and through a warm
``orch serve`` (the ``both_ways`` fixture: the real ``orch`` client in a subprocess, the
daemon on a thread of this process).

The daemon once re-read a job's command line to guess which keys to ask its client for, and
guessed wrong: a retry (no ``-m``: the retried wave's models), a council whose chair is
config's ``defaults.chair``, a plugin's own variable. Now the client prepares the run and it
declares the variables it reads: each case sends exactly its keys, and they reach the wire.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

both_ways = pytest.mark.usefixtures("both_ways")
SEAT_KEY = "sk-parity-seat-0123456789abcdef"
CHAIR_KEY = "sk-parity-chair-fedcba9876543210"


def bearer(request) -> str | None:
    return request.headers.get("authorization")


@both_ways
def test_retry_failed_reaches_the_retried_waves_keyed_provider(orch, scripted_server,
                                                              monkeypatch):
    orch.provider(api_key_env="FAKE_KEY")
    monkeypatch.setenv("FAKE_KEY", SEAT_KEY)
    scripted_server.script("a", Reply(text="a says"))
    scripted_server.script("b", Reply(status=500), Reply(text="b says now"))
    first = invoke(["fanout", "-m", "scripted/a,scripted/b", "-p", "q", "--tools", "none",
                    "--json"])
    assert first.exit_code == 2, first.output
    wave = json.loads(first.stdout)["wave_id"]
    retry = invoke(["fanout", "--retry-failed", wave, "--json"])
    assert retry.exit_code == 0, retry.output
    assert "needs $FAKE_KEY" not in retry.output
    doc = json.loads(retry.stdout)
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] and doc["retry_of"] == wave
    sent = scripted_server.requests_for("b")
    assert len(sent) == 2 and bearer(sent[-1]) == f"Bearer {SEAT_KEY}"  # the key was sent
    assert SEAT_KEY not in retry.output


@both_ways
def test_a_council_whose_configured_chair_is_on_another_keyed_provider(
        orch, scripted_server, monkeypatch):
    from test_council_run import chair, seat

    orch.provider(api_key_env="SEAT_KEY")
    orch.provider("judges", api_key_env="CHAIR_KEY")
    orch.config(defaults={"chair": "judges/delta"})
    monkeypatch.setenv("SEAT_KEY", SEAT_KEY)
    monkeypatch.setenv("CHAIR_KEY", CHAIR_KEY)
    for name in ("alpha", "bravo"):
        scripted_server.script(name, seat(name))
    scripted_server.script("delta", chair())
    result = invoke(["council", "run", "-p", "Review this change to the query layer.",
                     "-m", "scripted/alpha,scripted/bravo", "--tools", "none", "--json"])
    assert "needs $CHAIR_KEY" not in result.output
    doc = json.loads(result.stdout)
    assert doc["chair"]["model"] == "judges/delta" and doc["verdict"] == "fix-first", \
        result.stderr
    (asked,) = scripted_server.requests_for("delta")
    assert bearer(asked) == f"Bearer {CHAIR_KEY}"
    assert {bearer(r) for r in scripted_server.requests_for("alpha")} == {f"Bearer {SEAT_KEY}"}


PLUGIN = '''
from orchestrator import keys
from orchestrator.hookspecs import hookimpl

KEY_VARIABLES = ("ORCHTEST_SERVICE_KEY",)


@hookimpl
def before_request(leg, request):
    """Reads its own declared key (sent as a header, as a real service plugin would) and
    one it never declared (which it must not get)."""
    own = keys.read("ORCHTEST_SERVICE_KEY")
    stray = keys.read("ORCHTEST_UNDECLARED_KEY")
    headers = {"X-Service-Key": own or "unset", "X-Stray": "got it" if stray else "unset"}
    return request.evolve(params={**request.params, "extra_headers": headers})
'''


@pytest.fixture
def service_plugin(tmp_path, monkeypatch):
    """A third-party plugin, installed (an entry point in a .dist-info) on sys.path here
    and on PYTHONPATH for the real client."""
    site = tmp_path / "site"
    info = site / "orch_test_service-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: orch-test-service\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[orch]\nservice = orchtest_service\n")
    (site / "orchtest_service.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    yield
    import sys

    sys.modules.pop("orchtest_service", None)


@pytest.mark.usefixtures("service_plugin", "both_ways")  # installed before the daemon starts
def test_a_third_party_plugin_reads_its_own_declared_key(orch, scripted_server, monkeypatch):
    service_key = "svc-parity-0123456789abcdef"
    monkeypatch.setenv("ORCHTEST_SERVICE_KEY", service_key)
    monkeypatch.setenv("ORCHTEST_UNDECLARED_KEY", "undeclared-0123456789abcdef")
    orch.provider()
    scripted_server.script("m", Reply(text="served"))
    result = invoke(["fanout", "-m", "scripted/m", "-p", "q", "--tools", "none", "--json"])
    assert result.exit_code == 0, result.output
    (request,) = scripted_server.requests_for("m")
    assert request.headers.get("x-service-key") == service_key  # declared: it got it
    assert request.headers.get("x-stray") == "unset"  # undeclared: in-process too
    assert service_key not in result.output
