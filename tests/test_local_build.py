"""`orch local build`: a finished build is found at once; what is missing is said in one line.
The real compile runs in test_local_realmodel.py (README command 1)."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.local import build


def orch(*args):
    return CliRunner().invoke(cli, list(args))


def seed_build(stamp_flags=None) -> None:
    build.install_dir().mkdir(parents=True)
    build.binary().write_text("#!/bin/sh\necho version\n")
    build.binary().chmod(0o755)
    build.stamp_path().write_text(json.dumps({
        "version": build.SDIST_VERSION, "flags": stamp_flags or build.CMAKE_FLAGS,
        "binary": str(build.binary()), "seconds": 600.0}))


def test_a_finished_build_is_found_at_once_in_the_data_directory(orch_home):
    seed_build()
    result = orch("local", "build")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"llama-server {build.SDIST_VERSION} already built: ")
    assert str(build.binary()).startswith(os.environ["ORCH_DATA_HOME"])
    doc = json.loads(orch("local", "build", "--json").stdout)
    assert doc["cached"] is True and "-DGGML_NATIVE=OFF" in doc["flags"]


def test_a_build_with_other_flags_is_not_taken_for_this_one(orch_home, monkeypatch):
    seed_build(stamp_flags=["-DGGML_NATIVE=ON"])
    assert build.built() is None
    monkeypatch.setattr(build.shutil, "which", lambda *a, **k: None)
    result = orch("local", "build")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "orch: error: building the local server needs cmake: pip install -e '.[local]' "
        "installs it (or apt-get install cmake)"]


def test_no_compiler_is_one_line_naming_the_package(orch_home, monkeypatch):
    real_which = build.shutil.which
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(build.shutil, "which",
                        lambda name, **k: None if name in ("c++", "g++", "clang++")
                        else real_which(name, **k))
    result = orch("local", "build")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "needs a C++ compiler: apt-get install g++" in result.stderr
    assert not build.install_dir().exists()  # nothing half-installed
