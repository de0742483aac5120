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


def test_a_second_build_at_once_is_refused_in_one_line_and_touches_nothing(orch_home):
    """Two `orch local build` at once: the one holding the lock builds; the other is refused
    at once, and leaves the first one's work directory alone."""
    import subprocess
    import sys

    from orchestrator.local.data import data_dir

    work = data_dir() / "build"
    work.mkdir(parents=True)
    (work / "in-progress").write_text("the first build's sources")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         "from orchestrator.local.build import _one_build\n"
         "with _one_build():\n    print('held', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "orchestrator", "local", "build"],
                                capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 1
    assert second.stderr.strip().splitlines() == [
        f"orch: error: another `orch local build` is running (pid {holder.pid}, since "
        f"{second.stderr.split('since ')[1].split(')')[0]}); wait for it to finish, then run "
        "this again: it finds the build cached"]
    assert (work / "in-progress").read_text() == "the first build's sources"


def test_progress_says_how_long_is_left_from_the_pace_so_far():
    assert build.eta(120.0, 40, 200) == " · about 8 min left"
    assert build.eta(5.0, 0, 200) == "" and build.eta(5.0, 200, 200) == ""
