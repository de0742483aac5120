"""The entry points remembered on disk (plugin_host/listing.py): a second `orch --help`
reads no distribution's metadata (it never imports ``importlib.metadata``), and whatever
pip does to the installed distributions is seen at once: a plugin installed, removed, or
replaced by another version. The real entry point in a subprocess."""

from __future__ import annotations

import json
import os
import shutil

from test_plugins_loading import orch_process, site  # noqa: F401 - the fixture

PLUGIN = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def leg_start(leg):
    pass
"""


def listed(home, where, **env) -> dict[str, dict]:
    ran = orch_process("plugins", "--json", home=home, site=where, **env)
    assert ran.returncode == 0, ran.stderr
    return {p["name"]: p for p in json.loads(ran.stdout)["plugins"]}


def test_a_second_help_reads_no_distribution(orch_home, site):  # noqa: F811
    site.install("orch-seen", "1.0", {"seen": PLUGIN})
    first = orch_process("--help", home=orch_home, site=site, PYTHONPROFILEIMPORTTIME="1")
    second = orch_process("--help", home=orch_home, site=site, PYTHONPROFILEIMPORTTIME="1")
    assert first.returncode == second.returncode == 0
    assert "importlib.metadata" in first.stderr  # read once ...
    assert "importlib.metadata" not in second.stderr  # ... then remembered
    assert list((orch_home / "cache").glob("entry-points-*.json"))


def test_what_pip_does_is_seen_at_once(orch_home, site):  # noqa: F811
    site.install("orch-seen", "1.0", {"seen": PLUGIN})
    assert listed(orch_home, site)["seen"]["version"] == "1.0"
    assert listed(orch_home, site)["seen"]["status"] == "loaded"
    info = site.path / "orch_seen-1.0.dist-info"
    shutil.rmtree(info)  # an upgrade: the old .dist-info out, the new one in
    site.install("orch-seen", "2.0", {"seen": PLUGIN})
    assert listed(orch_home, site)["seen"]["version"] == "2.0"
    shutil.rmtree(site.path / "orch_seen-2.0.dist-info")  # uninstalled
    os.utime(site.path)
    assert "seen" not in listed(orch_home, site)
    site.install("orch-other", "1.0", {"other": PLUGIN})
    assert "other" in listed(orch_home, site)


def test_a_broken_listing_is_read_past(orch_home, site):  # noqa: F811
    site.install("orch-seen", "1.0", {"seen": PLUGIN})
    listed(orch_home, site)
    for path in (orch_home / "cache").glob("entry-points-*.json"):
        path.write_text('{"group": "orch", "key": ')
    assert listed(orch_home, site)["seen"]["status"] == "loaded"


def test_a_remembered_plugin_that_is_gone_is_broken_not_fatal(orch_home, site):  # noqa: F811
    """A module deleted without pip (its .dist-info left): listed broken, orch still runs."""
    site.install("orch-seen", "1.0", {"seen": PLUGIN})
    listed(orch_home, site)
    (site.path / f"{site.module('seen')}.py").unlink()
    shown = listed(orch_home, site)["seen"]
    assert shown["status"] == "broken" and "ModuleNotFoundError" in shown["error"]
