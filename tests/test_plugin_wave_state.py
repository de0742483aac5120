"""A leg hook reaches its wave: ``leg.wave.shared(plugin)`` is state the wave's legs share,
gone with the wave (engine/context.py)."""

from __future__ import annotations

import types

from orchestrator.hookspecs import hookimpl


def wave_counter() -> types.ModuleType:
    """Wave-wide accounting from a leg hook: no module-level dict, lock or clean-up."""
    import threading

    module = types.ModuleType("wave_counter")
    module.NAME = "wave_counter"

    @hookimpl
    def before_request(leg, request):
        held = leg.wave.shared("wave_counter", lambda: {"lock": threading.Lock(), "n": 0})
        with held["lock"]:
            held["n"] += 1
        return None

    @hookimpl
    def wave_end(wave):
        for leg in wave.legs:
            leg.set("wave_requests", wave.shared("wave_counter")["n"])

    module.before_request, module.wave_end = before_request, wave_end
    return module


def test_a_leg_hook_keeps_wave_state_on_its_wave(orch, scripted_server):
    plugin = wave_counter()
    first = orch.run_wave(["a", "b", "c"], "hi", plugins=[plugin])
    assert [leg["wave_requests"] for leg in first.legs] == [3, 3, 3]
    assert len(first.bodies) == 3
    second = orch.run_wave(["a"], "hi", plugins=[plugin])  # a new wave starts from nothing
    assert second.leg["wave_requests"] == 1
