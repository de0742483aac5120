"""Hook dispatch cost per request: 10 no-op plugins behind the runner, against the same plugins
called inline and against none (targets: under 50 µs per request for synchronous plugins,
under 150 µs for ``async`` ones, at load 2 or less).

Run by hand: ``.venv/bin/python bench/bench_hooks.py [--rounds 7] [--steps 20] [--no-wire]``.

Two measurements, with ten plugins that each implement ``before_request``,
``after_response`` and ``step_end`` and do nothing:

1. **On the wire** — sequential legs of ``--steps`` requests each against the zero-latency
   scripted server (its own process), through the real engine: litellm, HTTP, records.
   Interleaved rounds, medians; the difference is small next to HTTP, so it is noisy.
2. **The chain alone** — the three hook calls a request makes (HookRunner, as the leg calls
   it), no HTTP: the precise per-request figure. Five sides, interleaved: no plugin; ten
   synchronous plugins inline (as built-ins run: the baseline with no boundary) and behind the
   runner (a worker thread, one hand-over per hook call); ten ``async`` ones inline (awaited
   on the legs' loop) and behind the runner (the plugin loop, one hand-over per hook call).
   Beside them the floor: three bare lock hand-overs between two threads per request,
   nothing run, what any runner that keeps plugin code off orch's thread pays.

``--against TREE`` runs the chain of this checkout and of another checkout's source (main's:
``git archive main orchestrator plugins | tar -x -C TREE``), a process per tree and round,
their order alternated: before and after in one run (writes bench/results/hooks_against.json).

Entry-point plugins are not loaded on either side (the baseline is truly zero plugins); one
in-process plugin offers the ``noop`` tool that keeps each leg going for ``--steps`` requests
(``register_tools`` fires once per leg, not per request). Writes bench/results/hooks.json.
"""

from __future__ import annotations

import argparse
import os
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

TARGET_US = {"sync": 50.0, "async": 150.0}  # per request, the runner's side, at load <= 2
PLUGINS = 10


def noop_plugins(n: int, *, asynchronous: bool = False) -> list[tuple[str, object]]:
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

    class AsyncNoop:
        @hookimpl
        async def before_request(self, leg, request):
            return None

        @hookimpl
        async def after_response(self, leg, request, response):
            return None

        @hookimpl
        async def step_end(self, leg, step):
            return None

    kind = AsyncNoop if asynchronous else Noop
    return [(f"noop{i}", kind()) for i in range(n)]


def managers(n: int):
    """(baseline, with n no-op plugins): plugin managers with no entry points loaded."""
    from orchestrator.plugin_host.plugins import load

    return (load(enabled=False, extra=[("bench_noop", noop_plugin())]),
            load(enabled=False, extra=[("bench_noop", noop_plugin()), *noop_plugins(n)]))


def chain_managers(n: int) -> dict[str, object]:
    """The chain's sides: no plugin; n no-op plugins, synchronous or ``async``, behind the
    runner (third parties) or inline (marked built-in: orch calls them itself)."""
    from orchestrator.plugin_host.plugins import load

    sides = {"zero": load(enabled=False)}
    for kind in ("sync", "async"):
        for where in ("runner", "inline"):
            pm = load(enabled=False, extra=noop_plugins(n, asynchronous=kind == "async"))
            if where == "inline":
                for info in pm.infos.values():
                    info.builtin = True
            sides[f"{kind} {where}"] = pm
    return sides


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


def floor(requests: int) -> float:
    """Microseconds per request for three bare hand-overs (a worker woken through one lock,
    the answer back through another, nothing run): what any runner that keeps plugin code
    off orch's thread pays per request before it does anything, priced by the kernel."""
    import _thread
    import threading

    go, done = _thread.allocate_lock(), _thread.allocate_lock()
    go.acquire()
    done.acquire()
    calls = 3 * requests

    def worker() -> None:
        for _ in range(calls):
            go.acquire()
            done.release()

    threading.Thread(target=worker, daemon=True).start()
    t0 = time.perf_counter()
    for _ in range(calls):
        go.release()
        done.acquire()
    return (time.perf_counter() - t0) * 1e6 / requests


def chain_round(requests: int) -> dict[str, float]:
    """One round of every side of the chain, and the floor."""
    sides = chain_managers(PLUGINS)
    out = {side: chain(pm, requests) for side, pm in sides.items()}
    out["floor"] = floor(requests)
    return out


def against(tree: str, rounds: int, requests: int) -> dict[str, dict[str, list[float]]]:
    """The chain of this checkout and of ``tree`` (another checkout's source, e.g. main's:
    ``git archive main orchestrator plugins | tar -x -C DIR``), each round one process per
    tree, their order alternated: the before/after figures of one run."""
    import json
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parents[1])
    trees = {"this": here, "against": str(Path(tree).resolve())}
    out: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    for r in range(rounds):
        order = list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]
        for label, root in order:
            env = {**os.environ, "PYTHONPATH": root}
            done = subprocess.run(
                [sys.executable, __file__, "--one-round", "--chain-requests", str(requests)],
                env=env, capture_output=True, text=True, check=True, cwd="/")
            for side, value in json.loads(done.stdout.splitlines()[-1]).items():
                out[label].setdefault(side, []).append(value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per side")
    parser.add_argument("--legs", type=int, default=5, help="sequential legs per round")
    parser.add_argument("--steps", type=int, default=20, help="requests per leg")
    parser.add_argument("--chain-requests", type=int, default=20000)
    parser.add_argument("--chain-rounds", type=int, default=5)
    parser.add_argument("--no-wire", action="store_true", help="the chain alone")
    parser.add_argument("--against", metavar="TREE",
                        help="also run the chain of another checkout's source (main's: "
                             "git archive main orchestrator plugins | tar -x -C TREE), "
                             "a process per tree and round, interleaved")
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    offline()
    if args.one_round:  # a child of --against: one round, as JSON
        import json

        print(json.dumps(chain_round(args.chain_requests)))
        return
    if args.against:
        compare(args)
        return
    load_before = os.getloadavg()

    wire_ms: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="orch-bench-hooks-") as tmp:
        tmp_path = Path(tmp)
        if not args.no_wire:
            names = ModelNames("h", 1 + 2 * args.rounds * args.legs)
            script = write_script(tmp_path / "script.json", names.all(), args.steps)
            with scripted_server(latency_ms=0, script=script) as url:
                wire_ms = wire(url, tmp_path / "home", args.rounds, args.legs, args.steps,
                               names)
        sides = chain_managers(PLUGINS)
        chain_us: dict[str, list[float]] = {side: [] for side in [*sides, "floor"]}
        for _ in range(args.chain_rounds):  # interleaved: a busy moment hits every side
            for side, pm in sides.items():
                chain_us[side].append(chain(pm, args.chain_requests))
            chain_us["floor"].append(floor(args.chain_requests))
    load_after = os.getloadavg()

    if wire_ms:
        wz, wt = statistics.median(wire_ms["zero"]), statistics.median(wire_ms["ten"])
        print(f"on the wire ({args.rounds} rounds x {args.legs} legs x {args.steps} requests, "
              "median ms/request):")
        print(f"  zero plugins {wz:7.3f}   {PLUGINS} no-op plugins {wt:7.3f}   "
              f"ratio {wt / wz:.3f}   difference {wt - wz:+.3f} ms")
    best = {side: min(values) for side, values in chain_us.items()}
    median = {side: statistics.median(values) for side, values in chain_us.items()}
    print(f"the chain alone ({args.chain_requests} requests x {args.chain_rounds} rounds, "
          f"us/request; load {load_before[0]:.1f} -> {load_after[0]:.1f}):")
    for side in chain_us:
        print(f"  {side:13s} best {best[side]:8.1f}   median {median[side]:8.1f}")
    verdicts = {}
    for kind in ("sync", "async"):
        runner, inline = median[f"{kind} runner"], median[f"{kind} inline"]
        verdicts[kind] = runner < TARGET_US[kind]
        print(f"{PLUGINS} {kind} plugins behind the runner: {runner:.1f} us per request "
              f"({runner / inline:.1f}x inline, +{runner - inline:.1f} us); "
              f"{'meets' if verdicts[kind] else 'MISSES'} the {TARGET_US[kind]:g} us target")
    write_result("hooks", {
        "machine": machine(), "plugins": PLUGINS, "args": vars(args),
        "load": {"before": load_before, "after": load_after},
        "wire_ms_per_request": wire_ms,
        "chain_us_per_request": chain_us, "chain_best_us": best, "chain_median_us": median,
        "target_us": TARGET_US, "meets_target": verdicts,
    })


def compare(args) -> None:
    """--against: this checkout's chain beside another's, medians and ratios."""
    load_before = os.getloadavg()
    out = against(args.against, args.chain_rounds, args.chain_requests)
    load_after = os.getloadavg()
    median = {label: {side: statistics.median(v) for side, v in sides.items()}
              for label, sides in out.items()}
    print(f"the chain alone, this checkout against {args.against} ({args.chain_requests} "
          f"requests x {args.chain_rounds} rounds, a process per tree and round, median "
          f"us/request; load {load_before[0]:.1f} -> {load_after[0]:.1f}):")
    print(f"  {'side':13s} {'against':>9s} {'this':>9s}  this/against")
    for side in median["this"]:
        a, t = median["against"].get(side), median["this"][side]
        ratio = f"{t / a:.3f}" if a else "-"
        print(f"  {side:13s} {a or 0:9.1f} {t:9.1f}  {ratio}")
    for kind in ("sync", "async"):
        runner = median["this"][f"{kind} runner"]
        print(f"{PLUGINS} {kind} plugins behind the runner: {runner:.1f} us per request; "
              f"{'meets' if runner < TARGET_US[kind] else 'MISSES'} the "
              f"{TARGET_US[kind]:g} us target")
    write_result("hooks_against", {
        "machine": machine(), "plugins": PLUGINS, "args": vars(args),
        "load": {"before": load_before, "after": load_after}, "chain_us_per_request": out,
        "chain_median_us": median, "target_us": TARGET_US})


if __name__ == "__main__":
    main()
