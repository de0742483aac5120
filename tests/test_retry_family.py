"""`--retry-failed` plans from the whole family and from what was paid, under one claim:
retried twice, after a full disk, four at once - no leg is paid twice, the ceiling holds."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows

from orchestrator.cli import cli
from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]


def fanout(*args: str):
    return CliRunner().invoke(cli, ["fanout", "--tools", "none", *args])


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, ORCH_HOME=str(home))
    env.update(extra)
    env.pop("ORCH_RUNS_DIR", None)
    return env


def waves(home: Path) -> set[str]:
    return {p.parent.name for p in (home / "runs").glob("*/wave.json")}


def test_a_second_retry_of_the_same_wave_does_not_pay_for_what_the_first_completed(
        orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="a says"))
    scripted_server.script("b", Reply(status=500), Reply(text="b says"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--json").stdout)
    assert [leg["status"] for leg in first["legs"]] == ["complete", "error"]
    retry = json.loads(fanout("--retry-failed", first["wave_id"], "--json").stdout)
    assert [leg["status"] for leg in retry["legs"]] == ["complete"]
    # the same wave again, and the retry's own id: the family says b is done
    for again in (first["wave_id"], retry["wave_id"]):
        result = fanout("--retry-failed", again)
        assert result.exit_code == 0 and "nothing to retry" in result.stderr
    assert scripted_server.count("b") == 2 and scripted_server.count("a") == 1
    assert retry["options"]["retry_slots"] == [first["legs"][1]["leg_id"]]


def test_a_retry_of_a_retry_of_a_sibling_sees_every_member(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(status=500), Reply(status=500), Reply(text="a at last"))
    scripted_server.script("b", Reply(status=500), Reply(text="b says"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--json").stdout)
    one = json.loads(fanout("--retry-failed", first["wave_id"], "--json").stdout)
    assert [leg["status"] for leg in one["legs"]] == ["error", "complete"]
    # retrying the ORIGINAL again: b completed in a sibling, only a is sent
    two = json.loads(fanout("--retry-failed", first["wave_id"], "--json").stdout)
    assert [leg["model"] for leg in two["legs"]] == ["scripted/a"]
    assert two["legs"][0]["status"] == "complete"
    assert scripted_server.count("a") == 3 and scripted_server.count("b") == 2


def test_the_chair_is_not_called_again_when_every_retried_leg_failed_again(
        orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="a says"))
    scripted_server.script("b", Reply(status=500))
    scripted_server.script("judge", Reply(text="synthesis"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--chair",
                              "scripted/judge", "--json").stdout)
    assert first["chair"]["status"] == "complete"
    retry = json.loads(fanout("--retry-failed", first["wave_id"], "--json").stdout)
    assert retry["legs"][0]["status"] == "error" and retry["chair"] is None
    assert any("the chair was not called again" in n for n in retry["notices"])
    assert scripted_server.count("judge") == 1
    # a retry that brings a new answer calls it, with every answer of the family
    scripted_server.script("b", Reply(text="b at last"))
    last = json.loads(fanout("--retry-failed", retry["wave_id"], "--json").stdout)
    assert last["chair"]["status"] == "complete" and scripted_server.count("judge") == 2
    packet = scripted_server.requests_for("judge")[-1].body["messages"][-1]["content"]
    assert "a says" in packet and "b at last" in packet


def test_a_chair_the_ceiling_refused_is_not_retried(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.script("a", Reply(text="long", usage={"prompt_tokens": 20,
                                                          "completion_tokens": 500}))
    scripted_server.script("judge", Reply(text="never sent"))
    first = json.loads(fanout("-m", "scripted/a", "-p", "q", "--max-cost", "4.1",
                              "--output-budget", "4000", "--chair", "scripted/judge",
                              "--json").stdout)
    assert first["chair"]["status"] == "refused"
    assert first["chair"]["reason"].startswith("COST_CEILING")
    before = waves(orch_home)
    result = fanout("--retry-failed", first["wave_id"])
    assert result.exit_code == 0 and "nothing to retry" in result.stderr
    assert waves(orch_home) == before and scripted_server.count("judge") == 0


FULL_DISK = """
import errno, sys
from orchestrator import store
real = store._write_tmp
def write_tmp(path, text, *a, **k):
    # the disk fills once the wave has started: no final wave.json, no final metadata.json
    if path.name in ("wave.json", "metadata.json") and '"status": "running"' not in text:
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(path, text, *a, **k)
store._write_tmp = write_tmp
from orchestrator.cli import main
sys.argv = ["orch", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_after_a_full_disk_the_retry_sees_the_outboxed_legs_as_paid(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.default = Reply(text="paid", usage={"prompt_tokens": 10,
                                                        "completion_tokens": 5})
    # the ledger cannot be written either: its path is a directory, so rows go to the outbox
    broken = tmp_path / "full"
    (broken / "ledger.db").mkdir(parents=True)
    env = env_for(orch_home, ORCH_LEDGER_URL=f"sqlite:///{broken / 'ledger.db'}")
    run = subprocess.run([sys.executable, "-c", FULL_DISK, "fanout", "-m",
                          ",".join(f"scripted/m{n}" for n in range(4)), "-p", "q", "--tools",
                          "none", "-q"], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    wave_id = next(iter(waves(orch_home)))
    on_disk = json.loads((orch_home / "runs" / wave_id / "wave.json").read_text())
    assert on_disk["status"] == "running"  # stale, as after the real thing
    outboxed = (broken / f"ledger-outbox-{_fingerprint(env['ORCH_LEDGER_URL'])}.jsonl")
    # a leg's row is written at its first billed answer and moved forward by seq: the outbox
    # holds a line per advance, and each leg's furthest line says it completed, paid once
    lines = [json.loads(line)["row"] for line in outboxed.read_text().splitlines()]
    assert len(lines) >= 4
    assert _furthest_per_leg(lines) == {row["leg_id"]: ("complete", 1) for row in lines}
    assert len({row["leg_id"] for row in lines}) == 4
    sent = scripted_server.count()
    # the ledger still cannot be opened: the outbox alone says the legs were paid
    again = subprocess.run([*ORCH, "fanout", "--retry-failed", wave_id], env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to retry" in again.stderr, again.stderr
    # the disk is back: opening the ledger replays the lines as one row per leg, at the
    # furthest seq each leg reached, and the retry reads them there
    (broken / "ledger.db").rmdir()
    from orchestrator.ledger.spend import Ledger

    ledger = Ledger(env["ORCH_LEDGER_URL"])
    assert ledger.replayed == 4
    ledger.close()
    assert not outboxed.exists() or not outboxed.read_text().strip()
    monkeypatch.setenv("ORCH_LEDGER_URL", env["ORCH_LEDGER_URL"])
    result = fanout("--retry-failed", wave_id)
    assert result.exit_code == 0 and "nothing to retry" in result.stderr
    assert scripted_server.count() == sent == 4
    con = sqlite3.connect(broken / "ledger.db")
    rows = con.execute("select leg_id, status, seq, cost_usd from spend where wave_id = ?",
                       (wave_id,)).fetchall()
    assert sorted((status, seq) for _, status, seq, _ in rows) == [("complete", 1)] * 4
    assert len({leg for leg, *_ in rows}) == 4
    assert sum(cost for *_, cost in rows) == pytest.approx(4 * 15e-6)


def _furthest_per_leg(rows: list[dict]) -> dict[str, tuple[str, int]]:
    """leg id -> (status, seq) of its furthest line: the highest seq, an ended row over one
    in flight at the same seq (as the ledger's unique key keeps it)."""
    from orchestrator.ledger.in_flight import IN_FLIGHT

    furthest: dict[str, dict] = {}
    for row in rows:
        held = furthest.get(row["leg_id"])
        rank = (row["seq"], row.get("reason") != IN_FLIGHT)
        if held is None or rank >= (held["seq"], held.get("reason") != IN_FLIGHT):
            furthest[row["leg_id"]] = row
    return {leg: (row["status"], row["seq"]) for leg, row in furthest.items()}


@pytest.mark.slow
def test_after_a_full_disk_the_retry_runs_only_the_failed_leg_with_what_the_record_left(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """Three legs paid $0.015 each into the outbox, one failed; wave.json says running and
    every leg's files say $0. The retry sends only the failed leg, under the ceiling less what
    the outbox says was paid."""
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    scripted_server.default = Reply(text="paid", usage={"prompt_tokens": 10,
                                                        "completion_tokens": 5})
    for n in range(3):  # scripted, so the server's model list names them (models are checked)
        scripted_server.script(f"m{n}", Reply(text="paid", usage={"prompt_tokens": 10,
                                                                  "completion_tokens": 5}))
    scripted_server.script("m3", Reply(status=500), Reply(text="at last", usage={
        "prompt_tokens": 10, "completion_tokens": 5}))
    broken = tmp_path / "full"
    (broken / "ledger.db").mkdir(parents=True)
    env = env_for(orch_home, ORCH_LEDGER_URL=f"sqlite:///{broken / 'ledger.db'}")
    run = subprocess.run([sys.executable, "-c", FULL_DISK, "fanout", "-m",
                          ",".join(f"scripted/m{n}" for n in range(4)), "-p", "q", "--tools",
                          "none", "-q", "--max-cost", "1", "--output-budget", "100"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    wave_id = next(iter(waves(orch_home)))
    monkeypatch.setenv("ORCH_LEDGER_URL", env["ORCH_LEDGER_URL"])
    doc = json.loads(fanout("--retry-failed", wave_id, "--json").stdout)
    assert [leg["model"] for leg in doc["legs"]] == ["scripted/m3"]
    assert doc["legs"][0]["status"] == "complete"
    assert doc["options"]["max_cost_family"]["spent"] == pytest.approx(0.045)
    assert doc["options"]["max_cost"] == pytest.approx(1 - 0.045)
    assert [scripted_server.count(f"m{n}") for n in range(4)] == [1, 1, 1, 2]
    # the disk is back: the replay leaves one row per paid leg, none paid twice
    (broken / "ledger.db").rmdir()
    from orchestrator.ledger.spend import Ledger

    Ledger(env["ORCH_LEDGER_URL"]).close()
    con = sqlite3.connect(broken / "ledger.db")
    paid = con.execute("select wave_id, leg_id, seq, cost_usd from spend where status = "
                       "'complete'").fetchall()
    assert len(paid) == len({(w, leg) for w, leg, *_ in paid}) == 4
    assert {seq for _, _, seq, _ in paid} == {1}
    assert sum(cost for *_, cost in paid) == pytest.approx(0.06)


def _fingerprint(url: str) -> str:
    from orchestrator.ledger.outbox import locations

    return locations(url)[0].name.removeprefix("ledger-outbox-").removesuffix(".jsonl")


def _family_at_nine(orch, scripted_server) -> dict:
    """Wave W under --max-cost 9: a paid $4, b failed (the issue's case)."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    scripted_server.script("a", Reply(text="a says", usage={"prompt_tokens": 20,
                                                            "completion_tokens": 4000}))
    return json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "9",
                             "--output-budget", "4000", "--json").stdout)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_retries_of_one_family_pay_each_leg_once_under_the_ceiling(
        orch, scripted_server, orch_home, n):
    scripted_server.script("b", Reply(status=500))
    first = _family_at_nine(orch, scripted_server)
    assert [leg["status"] for leg in first["legs"]] == ["complete", "error"]
    # the retried leg answers slowly, so the retries overlap
    scripted_server.script("b", Reply(text="b says", latency=3.0, usage={
        "prompt_tokens": 20, "completion_tokens": 4000}))
    from orchestrator.testing import warm  # n orch processes at once, forked warm

    procs = [warm.start(["fanout", "--retry-failed", first["wave_id"], "-q"],
                        env=env_for(orch_home)) for _ in range(n)]
    results = [(done.returncode, done.stderr) for done in (p.wait(timeout=180) for p in procs)]
    assert scripted_server.count("b") == 2  # the failure, then one retry: paid once
    ran = [r for r in results if r[0] == 0 and "nothing to retry" not in r[1]]
    told = [r for r in results if r not in ran]
    assert len(ran) == 1 and len(told) == n - 1, results
    for code, err in told:  # refused while it ran, or planned after it: either way, why
        assert ("being retried now" in err and code == 1) or \
            ("nothing to retry" in err and code == 0), err
    total = sum(r["cost_usd"] for r in ledger_rows(orch_home))
    assert total == pytest.approx(8.00004) and total <= 9


@pytest.mark.slow
@pytest.mark.usefixtures("both_ways")  # in-process, and both retries inside one orch serve
def test_a_retry_started_while_another_runs_is_refused_in_one_line(
        orch, scripted_server, orch_home):
    scripted_server.script("b", Reply(status=500))
    first = _family_at_nine(orch, scripted_server)
    scripted_server.script("b", Reply(text="b says", latency=4.0, usage={
        "prompt_tokens": 20, "completion_tokens": 4000}))
    from orchestrator.testing import warm  # the winner: an orch process of its own

    winner = warm.start(["fanout", "--retry-failed", first["wave_id"], "-q"],
                        env=env_for(orch_home))
    deadline = time.monotonic() + 60
    while scripted_server.count("b") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scripted_server.count("b") == 2  # the winner's request is in flight
    loser = invoke(["fanout", "--retry-failed", first["wave_id"]])
    assert loser.exit_code == 1
    lines = loser.stderr.strip().splitlines()
    assert len(lines) == 1 and "being retried now by pid " in lines[0], loser.stderr
    assert "Traceback" not in loser.output
    done = winner.wait(timeout=120)
    assert done.returncode == 0, done.stderr
    assert scripted_server.count("b") == 2
    total = sum(r["cost_usd"] for r in ledger_rows(orch_home))
    assert total == pytest.approx(8.00004)


def test_a_planted_symlink_at_the_claim_is_refused_not_followed(orch, scripted_server,
                                                                orch_home, tmp_path):
    orch.provider()
    scripted_server.script("a", Reply(status=500))
    first = json.loads(fanout("-m", "scripted/a", "-p", "q", "--json").stdout)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (orch_home / "runs" / first["wave_id"] / "retry.lock").symlink_to(victim)
    result = fanout("--retry-failed", first["wave_id"])
    assert result.exit_code == 1 and "cannot claim wave" in result.stderr
    assert victim.read_text() == "precious" and scripted_server.count("a") == 1


def test_paid_legs_takes_the_furthest_copy_of_a_row_updated_in_place(orch_home):
    """A leg's row written at each billed request (seq 1, 2, 3: running totals), copies in
    the outbox and the ledger: the furthest is the leg's total, never their sum; a row in
    flight (aborted) does not complete the leg."""
    from orchestrator.engine.paid import paid_legs
    from orchestrator.ledger import outbox
    from orchestrator.ledger.connection import default_url

    base = {"wave_id": "w", "kind": "leg", "model": "p/m", "provider": "p"}
    lines = [{**base, "leg_id": "w-1", "seq": n, "status": "aborted", "cost_usd": n * 1.0}
             for n in (1, 2)]
    lines += [{**base, "leg_id": "w-1", "seq": 3, "status": "complete", "cost_usd": 3.0},
              {**base, "leg_id": "w-2", "seq": 2, "status": "aborted", "cost_usd": 2.0},
              *[{**base, "leg_id": "w-3", "status": "complete", "cost_usd": 0.5,
                 "ts": "2026-01-01T00:00:00+00:00"}] * 2]
    path = outbox.locations(default_url())[0]  # no ledger yet: the outbox alone answers
    path.write_text("".join(json.dumps({"row": row}) + "\n" for row in lines))
    paid = paid_legs(["w"])
    assert (paid["w-1"].cost_usd, paid["w-1"].complete) == (3.0, True)
    assert (paid["w-2"].cost_usd, paid["w-2"].complete) == (2.0, False)
    assert (paid["w-3"].cost_usd, paid["w-3"].complete) == (0.5, True)  # one row, two copies


def test_a_ceiling_edited_by_hand_in_wave_json_is_one_line_not_an_internal_error(
        orch, scripted_server):
    """The root's recorded ceiling passes the one check a typed --max-cost does."""
    orch.provider()
    scripted_server.script("a", Reply(text="a says"))
    scripted_server.script("b", Reply(status=400, text="no"))
    first = json.loads(fanout("-m", "scripted/a,scripted/b", "-p", "q", "--max-cost", "1",
                              "--json").stdout)
    path = orch.home / "runs" / first["wave_id"] / "wave.json"
    doc = json.loads(path.read_text())
    doc["options"]["max_cost"] = "abc"
    path.write_text(json.dumps(doc))
    sent = scripted_server.count()
    result = fanout("--retry-failed", first["wave_id"])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert f"--max-cost kept from wave {first['wave_id']}: 'abc' is not a number" in line
    assert "internal error" not in result.output and scripted_server.count() == sent
