"""The rate-limit gate in the shared server, against the scripted server's real 429s."""

from __future__ import annotations

import time

import anyio
import pytest

from orchestrator.errors import ProviderError
from orchestrator.models import gate as gate_mod
from orchestrator.testing.scripted_server import Reply


@pytest.fixture(autouse=True)
def fresh_gates():
    gate_mod.reset()
    yield
    gate_mod.reset()


def test_a_429_storm_is_ridden_out_with_the_gate_halving(orch, scripted_server):
    orch.provider()
    scripted_server.default = Reply(text="fine", latency=0.15)
    scripted_server.max_in_flight(2, retry_after=0.1)
    models = [f"m{i}" for i in range(8)]
    run = orch.run_wave(models, "go")
    assert [leg["status"] for leg in run.legs] == ["complete"] * 8
    statuses = [r.status for r in run.requests]
    assert statuses.count(200) == 8 and statuses.count(429) >= 1  # counted on the server
    assert run.doc["server"]["peak_in_flight"] == 8  # the first burst, before any 429
    # no retry came back before the Retry-After was over
    for model in models:
        tries = scripted_server.requests_for(model)
        for before, after in zip(tries, tries[1:], strict=False):
            assert before.status == 429 and after.t_start - before.t_end >= 0.1
    gate = next(iter(gate_mod._GATES.values()))
    assert gate.halvings >= 2 and gate.lowest <= 4  # 16 -> 8 -> 4 ...
    # The gate, not eight callers each on their own: far fewer 429s than a retry per leg
    # per round would give, and every retry waited for the Retry-After.
    assert statuses.count(429) < 8 * 3
    held = run.doc["server"]["rate_gate"][gate.endpoint]
    assert held["holds"] >= 1 and held["held_s"] >= 0.1 and held["lowest_limit"] == gate.lowest
    notice = [n for n in run.doc["notices"] if n.startswith("rate limit: ")]
    assert len(notice) == 1 and "the wave was held back" in notice[0]
    assert notice[0].endswith(f"concurrency lowered to {gate.lowest} of 16")
    assert run.doc["exit_code"] == 0


def test_after_a_storm_the_gate_keeps_the_wave_under_the_limit(orch, scripted_server):
    orch.provider(max_concurrent=3)
    scripted_server.default = Reply(text="fine", latency=0.1)
    run = orch.run_wave([f"m{i}" for i in range(9)], "go")
    assert all(leg["status"] == "complete" for leg in run.legs)
    assert scripted_server.peak_in_flight == 3  # max_concurrent from the provider's config
    assert run.doc["server"]["rate_gate"] == {}  # no 429, no hold, no notice
    assert not [n for n in run.doc["notices"] if n.startswith("rate limit")]


def test_unconfigured_the_gate_never_holds_a_healthy_wave_below_its_leg_count(
        orch, scripted_server):
    orch.provider()
    scripted_server.default = Reply(text="fine", latency=0.5)
    run = orch.run_wave([f"m{i}" for i in range(20)], "go", builtins=False)
    assert all(leg["status"] == "complete" for leg in run.legs)
    assert scripted_server.peak_in_flight == 20  # not held to the default 16
    gate = next(iter(gate_mod._GATES.values()))
    assert gate.ceiling == 20 and gate.limit == 20


def test_a_quota_429_is_not_retried(orch, scripted_server, orch_home):
    orch.provider()
    scripted_server.script("m", Reply(status=429, error_code="insufficient_quota"))
    run = orch.run_leg("m")
    assert scripted_server.count("m") == 1
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("quota: ")
    assert "You exceeded your current quota" in run.leg["reason"]


def test_a_wait_over_120_s_is_not_waited_out(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=300))
    t0 = time.monotonic()
    run = orch.run_leg("m")
    assert time.monotonic() - t0 < 10 and scripted_server.count("m") == 1
    assert run.leg["reason"].startswith("rate_limited:")
    assert "asked to wait 300 s: over the 120 s orch waits" in run.leg["reason"]


def test_the_seventh_retry_is_not_made(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=0.01))
    run = orch.run_leg("m")
    assert scripted_server.count("m") == 7  # the first try and six retries
    assert run.leg["status"] == "error" and "(gave up after 6 retries)" in run.leg["reason"]


def test_an_abort_during_a_pause_is_not_retried(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=30), Reply(text="late"))
    t0 = time.monotonic()
    run = orch.run_leg("m", timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    assert scripted_server.count("m") == 1
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("timeout")


def test_the_sdk_does_not_retry_behind_the_gate(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(status=429, retry_after=0.05), Reply(text="second"))
    run = orch.run_leg("m")
    assert run.leg["answer"] == "second" and scripted_server.count("m") == 2
    assert run.doc["server"]["requests"] == 2  # every request on the wire was the gate's


def test_backoff_without_retry_after_doubles_and_the_limit_regrows():
    gate = gate_mod.Gate("test", ceiling=8)
    err = ProviderError("rate_limited", "slow down", 429)
    waits = []
    for attempt in range(3):
        gate.paused_until = 0.0
        hold = gate._after_429(err, attempt, gate.epoch)
        waits.append(hold.seconds)
    assert 1.0 <= waits[0] <= 1.15 and 2.0 <= waits[1] <= 2.25 and 4.0 <= waits[2] <= 4.45
    assert gate.limit == 1 and gate.halvings == 3  # 8 -> 4 -> 2 -> 1
    stale = gate._after_429(err, 0, gate.epoch - 1)  # sent before the last halving
    assert stale is not None and gate.halvings == 3  # one halving per burst
    for _ in range(6):
        gate._after_success()
    assert gate.limit == 3  # +1 after every 3 successes
    huge = gate_mod.Gate("test", ceiling=8)._after_429(ProviderError(
        "rate_limited", "x", 429, retry_after=121), 0, 0)
    assert huge is None


def test_one_gate_per_endpoint_and_key_never_naming_the_key(monkeypatch):
    from orchestrator.models.addressing import ResolvedModel

    monkeypatch.setenv("GATE_TEST_KEY", "sk-abcdefghijklmnop")
    a = ResolvedModel("p/a", "p", "openai/a", api_base="http://u:pw@h:9/v1",
                      api_key_env="GATE_TEST_KEY", declared=True)
    b = ResolvedModel("p/b", "p", "openai/b", api_base="http://u:pw@h:9/v1",
                      api_key_env="GATE_TEST_KEY", declared=True)
    other = ResolvedModel("q/a", "q", "openai/a", api_base="http://h2/v1", declared=True)

    class Cfg:
        providers: dict = {}
        defaults = {"max_concurrent": 5}

    assert gate_mod.gate_for(a, Cfg) is gate_mod.gate_for(b, Cfg)
    assert gate_mod.gate_for(other, Cfg) is not gate_mod.gate_for(a, Cfg)
    gate = gate_mod.gate_for(a, Cfg)
    assert gate.endpoint == "http://h:9/v1" and gate.ceiling == 5
    assert "sk-" not in repr(gate_mod._GATES) and "pw" not in gate.endpoint


def test_cancelled_waiters_leave_no_slot_taken():
    gate = gate_mod.Gate("test", ceiling=1)

    async def main():
        async def slow():
            await anyio.sleep(0.2)
            return "ok"

        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.call, slow)
            await anyio.sleep(0.01)
            with anyio.move_on_after(0.05):
                await gate.call(slow)  # waits for the slot, then is cancelled
        assert gate.in_flight == 0 and gate._waiters == []
        assert await gate.call(slow) == "ok"

    anyio.run(main)
