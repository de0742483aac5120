"""Hook dispatch cost per request: 10 no-op plugins against none (target: under 0.3 ms).

Run by hand: ``.venv/bin/python bench/bench_hooks.py [--rounds 7] [--steps 20]``.

Two measurements, both with and without ten plugins that each implement ``before_request``,
``after_response`` and ``step_end`` and do nothing:

1. **On the wire** — sequential legs of ``--steps`` requests each against the zero-latency
   scripted server (its own process), through the real engine: litellm, HTTP, records.
   Interleaved rounds, medians; the difference is small next to HTTP, so it is noisy.
2. **The chain alone** — the three hook calls a request makes (HookRunner, as the leg calls
   it), no HTTP: the precise per-request figure.

Entry-point plugins are not loaded on either side (the baseline is truly zero plugins); one
in-process plugin offers the ``noop`` tool that keeps each leg going for ``--steps`` requests
(``register_tools`` fires once per leg, not per request). Writes bench/results/hooks.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    ModelNames,
    engine_setup,
    engine_wave,
    machine,
    noop_plugin,
    offline,
    scripted_server,
    write_result,
    write_script,
)

TARGET_MS = 0.3
PLUGINS = 10


def noop_plugins(n: int) -> list[tuple[str, object]]:
    from orchestrator.hookspecs import hookimpl

    class Noop:
        @hookimpl
        def before_request(self, leg, request):
            return None

        @hookimpl
        def after_response(self, leg, request, response):
            return None

        @hookimpl
        def step_end(self, leg, step):
            return None

    return [(f"noop{i}", Noop()) for i in range(n)]


def managers(n: int):
    """(baseline, with n no-op plugins): plugin managers with no entry points loaded."""
    from orchestrator.plugin_host.plugins import load

    return (load(enabled=False, extra=[("bench_noop", noop_plugin())]),
            load(enabled=False, extra=[("bench_noop", noop_plugin()), *noop_plugins(n)]))


# -- 1. on the wire ---------------------------------------------------------------------------

def wire(url: str, home: Path, rounds: int, legs: int, steps: int,
         names: ModelNames) -> dict[str, list[float]]:
    """Milliseconds per request, one sample per (round, side): ``legs`` sequential legs."""
    import anyio

    cfg, _ = engine_setup(home, url, builtins=False)
    sides = dict(zip(("zero", "ten"), managers(PLUGINS), strict=True))
    samples: dict[str, list[float]] = {side: [] for side in sides}

    async def run_legs(pm, models: list[str]) -> int:
        sent = 0
        for model in models:
            wave = engine_wave(cfg, pm, home / "runs", [model], max_steps=steps + 1)
            doc = await wave.run()
            assert doc["status"] == "complete", doc["legs"][0]["reason"]
            sent += doc["legs"][0]["requests"]
        return sent

    anyio.run(run_legs, sides["zero"], names.take(1))  # warm the connection pool and caches
    for r in range(rounds):
        order = list(sides.items()) if r % 2 == 0 else list(sides.items())[::-1]
        for side, pm in order:
            t0 = time.perf_counter()
            sent = anyio.run(run_legs, pm, names.take(legs))
            samples[side].append((time.perf_counter() - t0) * 1000 / sent)
            assert sent == legs * steps
    return samples


# -- 2. the chain alone -----------------------------------------------------------------------

def chain(pm, requests: int) -> float:
    """Microseconds per request for the hook calls a request makes, as engine/leg.py makes
    them: before_request and after_response pipelines, step_end notification."""
    import anyio

    from orchestrator.plugin_host.hooks import HookRunner
    from orchestrator.request import Request, Response

    hooks = HookRunner(pm)
    leg = object()
    request = Request(model="bench/m", messages=[{"role": "user", "content": "hi"}])
    response = Response(text="ok")
    errors: list = []

    def on_error(plugin, hook, exc):
        errors.append((plugin, hook, exc))

    async def loop() -> float:
        t0 = time.perf_counter()
        for step in range(requests):
            req = await hooks.pipeline("before_request", "request", request, on_error, leg=leg)
            resp = await hooks.pipeline("after_response", "response", response, on_error,
                                        leg=leg, request=req)
            await hooks.notify("step_end", on_error, leg=leg,
                               step={"step": step, "request": req, "response": resp,
                                     "tool_results": []})
        return time.perf_counter() - t0

    elapsed = anyio.run(loop)
    assert not errors, errors
    return elapsed * 1e6 / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per side")
    parser.add_argument("--legs", type=int, default=5, help="sequential legs per round")
    parser.add_argument("--steps", type=int, default=20, help="requests per leg")
    parser.add_argument("--chain-requests", type=int, default=20000)
    args = parser.parse_args()
    offline()

    with tempfile.TemporaryDirectory(prefix="orch-bench-hooks-") as tmp:
        tmp_path = Path(tmp)
        names = ModelNames("h", 1 + 2 * args.rounds * args.legs)
        script = write_script(tmp_path / "script.json", names.all(), args.steps)
        with scripted_server(latency_ms=0, script=script) as url:
            wire_ms = wire(url, tmp_path / "home", args.rounds, args.legs, args.steps, names)
        zero_pm, ten_pm = managers(PLUGINS)
        chain_us: dict[str, list[float]] = {"zero": [], "ten": []}
        for _ in range(5):
            chain_us["zero"].append(chain(zero_pm, args.chain_requests))
            chain_us["ten"].append(chain(ten_pm, args.chain_requests))

    wz, wt = statistics.median(wire_ms["zero"]), statistics.median(wire_ms["ten"])
    cz, ct = min(chain_us["zero"]), min(chain_us["ten"])
    overhead_ms = (ct - cz) / 1000
    print(f"on the wire ({args.rounds} rounds x {args.legs} legs x {args.steps} requests, "
          "median ms/request):")
    print(f"  zero plugins {wz:7.3f}   {PLUGINS} no-op plugins {wt:7.3f}   "
          f"ratio {wt / wz:.3f}   difference {wt - wz:+.3f} ms")
    print(f"the chain alone ({args.chain_requests} requests, best of 5, us/request):")
    print(f"  zero plugins {cz:7.2f}   {PLUGINS} no-op plugins {ct:7.2f}   "
          f"ratio {ct / cz:.1f}   added {overhead_ms * 1000:.1f} us = {overhead_ms:.4f} ms")
    verdict = "meets" if ct / 1000 < TARGET_MS else "MISSES"
    print(f"whole hook chain with {PLUGINS} plugins: {ct / 1000:.4f} ms per request; "
          f"{verdict} the {TARGET_MS} ms target")
    write_result("hooks", {
        "machine": machine(), "plugins": PLUGINS, "args": vars(args),
        "wire_ms_per_request": wire_ms,
        "wire_median_ms": {"zero": wz, "ten": wt}, "wire_ratio": wt / wz,
        "chain_us_per_request": chain_us, "chain_best_us": {"zero": cz, "ten": ct},
        "chain_added_ms": overhead_ms, "target_ms": TARGET_MS,
        "meets_target": ct / 1000 < TARGET_MS,
    })


if __name__ == "__main__":
    main()
