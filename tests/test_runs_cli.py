"""`orch runs`: list, show, tail (a live wave in a subprocess) and gc, through the real CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from test_bench_e2e import bench_setup  # noqa: F401 - its fixture
from test_council_run import run_council, script_bench

from orchestrator.cli import cli
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply


def runs(*args: str):
    return CliRunner().invoke(cli, ["runs", *args])


def listed(*args: str) -> dict[str, dict]:
    result = runs("--json", *args)
    assert result.exit_code == 0, result.output
    return {r["id"]: r for r in json.loads(result.stdout)["runs"]}


@pytest.fixture
def three_runs(orch, scripted_server):
    """A complete wave (tagged), a partial one and a council."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("ok", Reply(text="fine", usage={"prompt_tokens": 1000,
                                                            "completion_tokens": 0}))
    scripted_server.script("bad", Reply(status=400, error_message="no such thing"))
    good = orch.run_wave(["ok"], tag="nightly").doc["wave_id"]
    mixed = orch.run_wave(["ok", "bad"]).doc["wave_id"]
    script_bench(scripted_server)
    result, doc = run_council()
    assert doc is not None, result.output
    return good, mixed, doc["run_id"]


def test_the_list_names_kind_status_legs_cost_and_tag(three_runs):
    good, mixed, council = three_runs
    found = listed()
    assert found[good] | {"created_at": None, "dirs": None} == {
        "id": good, "kind": "wave", "status": "complete", "legs": 1, "cost_usd": 0.001,
        "created_at": None, "tag": "nightly", "exit_code": 0, "dirs": None}
    assert (found[mixed]["status"], found[mixed]["legs"], found[mixed]["exit_code"]) == (
        "partial", 2, 2)
    assert found[council]["kind"] == "council" and found[council]["legs"] == 3
    assert set(found) == {good, mixed, council}
    assert set(listed("--status", "partial")) == {mixed}
    assert set(listed("--status", "complete,partial")) >= {good, mixed}
    assert set(listed("--since", "1h")) == set(found)
    future = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert listed("--since", future) == {}
    human = runs().stdout.splitlines()
    assert human[0].split() == ["ID", "KIND", "STATUS", "LEGS", "COST", "AGE", "TAG"]
    assert any(line.startswith(good) and line.endswith("nightly") for line in human)


def test_bad_filters_are_one_line_errors(orch_home):
    bad_status = runs("--status", "finished")
    assert bad_status.exit_code == 2 and "choose from running, complete" in bad_status.output
    bad_since = runs("--since", "last tuesday")
    assert bad_since.exit_code == 2  # a usage mistake, like --status above
    assert bad_since.output.startswith("orch: error: cannot read --since 'last tuesday'")
    assert runs().stdout == "no runs yet (orch fanout starts one)\n"


def test_show_is_status_for_waves_and_run_json_for_councils(three_runs):
    good, mixed, council = three_runs
    shown = runs("show", mixed)
    status = CliRunner().invoke(cli, ["status", mixed])
    assert shown.exit_code == 0 and shown.stdout == status.stdout
    assert json.loads(runs("show", mixed, "--json").stdout)["status"] == "partial"
    council_doc = json.loads(runs("show", council, "--json").stdout)
    assert council_doc["run_id"] == council and council_doc["kind"] == "council"
    human = runs("show", f"council-{council}").stdout
    assert human.startswith(f"Council {council}: ") and "seat " in human
    missing = runs("show", "nope")
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


def test_every_command_finds_a_run_by_a_unique_prefix_and_status_alone_shows_the_latest(
        three_runs):
    good, mixed, council = three_runs
    status = lambda *a: CliRunner().invoke(cli, ["status", *a])  # noqa: E731
    prefix = mixed[:-3]  # the ids differ in their random tail
    assert runs("show", prefix).stdout == runs("show", mixed).stdout == status(prefix).stdout
    assert status(council[:-2]).stdout.startswith(f"Council {council}: ")  # not a wave: shown
    assert status().stdout.startswith(f"Council {council}: ")  # the latest run
    assert json.loads(status("--json").stdout)["run_id"] == council
    ambiguous = runs("show", "2")
    assert ambiguous.exit_code == 2 and "ambiguous: 3 runs match '2'" in ambiguous.output
    nowhere = status("nope")
    assert nowhere.exit_code == 2 and "`orch runs` lists them" in nowhere.output
    assert "ls" not in nowhere.output.split()


def test_status_with_no_runs_says_how_to_start_one(orch_home):
    result = CliRunner().invoke(cli, ["status"])
    assert result.exit_code == 1
    assert result.stderr.startswith("orch: error: no runs under ") and "orch fanout" in \
        result.stderr


def age_run(runs_dir, wave_id: str, days: int) -> None:
    path = runs_dir / wave_id / "wave.json"
    doc = json.loads(path.read_text())
    doc["created_at"] = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    path.write_text(json.dumps(doc))


def test_gc_removes_old_folders_and_the_ledger_keeps_its_rows(three_runs, orch_home):
    good, mixed, council = three_runs
    runs_dir = orch_home / "runs"
    age_run(runs_dir, good, 40)
    con = sqlite3.connect(orch_home / "ledger.db")
    before = con.execute("select count(*) from spend where wave_id = ?", (good,)).fetchone()[0]
    assert before == 1
    dry = runs("gc", "--older-than", "30d", "--dry-run", "--json")
    assert json.loads(dry.stdout) == {"dry_run": True, "removed": [good], "bytes_freed": 0}
    assert (runs_dir / good).exists() and (runs_dir / f"{good}-1").exists()
    done = runs("gc", "--older-than", "30d")
    assert done.exit_code == 0 and f"removed wave {good} (40d old)" in done.stdout
    assert not (runs_dir / good).exists() and not (runs_dir / f"{good}-1").exists()
    assert (runs_dir / mixed).exists()
    after = con.execute("select count(*) from spend where wave_id = ?", (good,)).fetchone()[0]
    assert after == before
    assert set(listed()) == {mixed, council}
    bad = runs("gc", "--older-than", "soon")
    assert bad.exit_code == 2 and "--older-than 'soon'" in bad.output
    assert runs("gc").exit_code == 2  # --older-than is required


def test_tail_follows_a_live_wave_in_another_process_and_exits_with_its_code(
        orch, scripted_server, orch_home):
    orch.provider()
    gate = threading.Event()  # the slow leg's answer waits until the tail has seen it run

    def slow(body, n):
        gate.wait(60)
        return Reply(text="done")

    scripted_server.script("slow", slow)
    scripted_server.script("bad", Reply(status=400, error_message="refused"))
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    wave = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "fanout", "-m", "scripted/slow,scripted/bad",
         "-p", "hi", "-q"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    runs_dir = orch_home / "runs"
    deadline = time.monotonic() + 60
    while not list(runs_dir.glob("*/wave.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (wave_json,) = runs_dir.glob("*/wave.json")
    wave_id = wave_json.parent.name
    tail = subprocess.Popen([sys.executable, "-m", "orchestrator", "runs", "tail", wave_id,
                             "--interval", "0.1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in tail.stdout:  # until it shows the slow leg running: then it may answer
            lines.append(line.rstrip("\n"))
            if lines[-1] == f"orch: {wave_id}-1 scripted/slow running":
                break
    finally:
        gate.set()
    lines += tail.stdout.read().splitlines()
    assert wave.wait(timeout=60) == 2, wave.stderr.read()
    assert tail.wait(timeout=60) == 2, tail.stderr.read()
    assert f"orch: {wave_id}-1 scripted/slow running" in lines  # seen while it ran
    assert any(line.startswith(f"orch: {wave_id}-1 scripted/slow complete") for line in lines)
    assert any(line.startswith(f"orch: {wave_id}-2 scripted/bad error") for line in lines)
    assert lines[-1] == f"wave {wave_id}: partial (exit 2)"


def test_tail_of_a_finished_run_returns_at_once_with_its_code(three_runs):
    good, mixed, council = three_runs
    assert runs("tail", good).exit_code == 0
    assert runs("tail", mixed).exit_code == 2
    followed = runs("tail", council)
    assert followed.exit_code == json.loads(runs("show", council, "--json").stdout)["exit_code"]


def test_an_unreadable_council_is_listed_and_show_says_so_in_one_line(orch_home):
    broken = orch_home / "runs" / "council-deadbeef"
    broken.mkdir(parents=True)
    (broken / "run.json").write_text("{half")
    assert listed()["deadbeef"]["status"] == "unreadable"
    shown = runs("show", "deadbeef")
    assert shown.exit_code == 1 and shown.output.startswith("orch: error: ")
    assert "cannot be read" in shown.output and "Traceback" not in shown.output


def test_a_bench_is_listed_shown_and_collected(bench_setup, orch):  # noqa: F811
    config = bench_setup  # a real bake-off's set-up (test_bench_e2e)
    ran = CliRunner().invoke(cli, ["bench", "--config", str(config), "--yes", "--timeout", "2",
                                   "--json", *unsafe_unless_confined()])
    assert list((orch.home / "bench").glob("bench-*.json")), ran.output[-1500:]
    (saved,) = (orch.home / "bench").glob("bench-*.json")  # the result file it wrote
    doc = json.loads(saved.read_text())
    bench_id = doc["bench_id"]
    assert ran.exit_code == 2  # trials were excluded, as in test_bench_e2e
    entry = listed("--status", "partial,complete")[bench_id]
    assert entry["kind"] == "bench" and entry["legs"] == len(doc["trials"])
    assert entry["exit_code"] == ran.exit_code
    shown = runs("show", bench_id)
    assert shown.stdout.startswith(f"Bench {bench_id}: ") and "trials: " in shown.stdout
    assert runs("tail", bench_id).exit_code == ran.exit_code
    path = orch.home / "bench" / f"{bench_id}.json"
    assert runs("gc", "--older-than", "2099-01-01", "--dry-run").exit_code == 0 and path.exists()
    runs("gc", "--older-than", "2099-01-01")
    assert not path.exists()


def test_a_council_whose_process_died_is_interrupted_not_running_forever(three_runs, orch_home):
    """run.json says `running` (the process was killed with -9), and its pid now belongs to
    nobody, or to another process: listing, show and tail all say `interrupted` at once."""
    _, _, council = three_runs
    path = orch_home / "runs" / f"council-{council}" / "run.json"
    doc = json.loads(path.read_text())
    assert doc["pid"] == os.getpid() and doc["pid_started"]  # recorded for liveness
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for pid, started in ((int(dead), doc["pid_started"]), (os.getpid(), "1")):  # gone; reused
        path.write_text(json.dumps(doc | {"status": "running", "exit_code": None,
                                          "pid": pid, "pid_started": started}))
        assert listed()[council]["status"] == "interrupted"
        assert json.loads(runs("show", council, "--json").stdout)["status"] == "interrupted"
        tail = runs("tail", council, "--interval", "0.05")
        assert tail.exit_code == 1 and "interrupted" in tail.stdout
    path.write_text(json.dumps(doc | {"status": "running", "exit_code": None}))  # alive: us
    assert listed()[council]["status"] == "running"
