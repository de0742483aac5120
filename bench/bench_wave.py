"""A wave of N legs × 3 steps at 1,000 ms latency against a bare litellm gather (the limit).

Run by hand: ``.venv/bin/python bench/bench_wave.py [--ns 1,8,32,64] [--reps 3]``.

The scripted server runs as its own process (``python -m orchestrator.testing.scripted_server
--latency-ms 1000``); every model answers with a ``noop`` tool call twice, then text, so each
leg makes 3 requests. In this process, for each N:

- engine: the wave `orch fanout` runs (Wave/WaveSpec, one shared Server, hooks, metadata.json,
  conversation.jsonl, wave.json, the SQLite ledger), with an in-process plugin offering ``noop``;
- bare: N concurrent chains of 3 sequential ``litellm.acompletion`` calls in one
  ``asyncio.gather`` — the same requests with nothing around them;
- bare, priced: the same, given the per-token prices orch's Server passes a declared
  endpoint (``_common.PRICED``): litellm then skips a price-map search that formats a
  traceback per answer for a name it does not know, so engine / this is orch's own overhead.

Runs alternate engine/bare so background load hits both alike; the median is reported.
Memory: the tracemalloc peak of one extra, untimed run per N and side (Python heap allocated
during the wave; tracemalloc slows the run, so it is never timed), and the RSS high-water
delta of the timed runs. Finally the same wave at N=8 through the real ``orch fanout``
subprocess, start-up included. Writes bench/results/wave.json (wave_default_gate.json with
``--max-concurrent 0``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from _common import (
    OFFLINE,
    PRICED,
    PROVIDER,
    ModelNames,
    PeakRSS,
    bare_chain,
    engine_setup,
    engine_wave,
    machine,
    offline,
    plugin_env,
    provider_entry,
    scripted_server,
    write_result,
    write_script,
)

STEPS = 3
TARGET_RATIO = 1.15


def run_engine(cfg, pm, runs: Path, models: list[str]) -> dict:
    import anyio

    wave = engine_wave(cfg, pm, runs, models)
    doc = anyio.run(wave.run)
    bad = [leg for leg in doc["legs"] if leg["status"] != "complete" or leg["requests"] != STEPS]
    if doc["status"] != "complete" or bad:
        raise RuntimeError(f"engine wave did not run {STEPS} steps per leg: "
                           f"{bad[:1] or doc['status']}")
    return doc


def run_bare(lm, url: str, models: list[str], **extra) -> None:
    async def gather():
        return await asyncio.gather(*(bare_chain(lm, url, m, STEPS, **extra) for m in models))

    lengths = asyncio.run(gather())
    if any(n != 1 + 2 * (STEPS - 1) for n in lengths):  # user + (assistant, tool) a tool step
        raise RuntimeError(f"bare chains did not run {STEPS} steps each: {lengths}")


def run_bare_priced(lm, url: str, models: list[str]) -> None:
    """The bare gather given the per-token prices orch passes a declared endpoint: against
    it, the ratio is orch's own overhead alone (litellm's price-map miss out of both)."""
    run_bare(lm, url, models, **PRICED)


def timed(fn, *args) -> tuple[float, float]:
    gc.collect()
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        fn(*args)
        wall = time.perf_counter() - t0
    return wall, rss.delta_mb


def traced_peak_mb(fn, *args) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def cli_plugin_dir(root: Path) -> Path:
    """A third-party plugin offering ``noop``, found the real way: an ``orch`` entry point in
    a dist-info on PYTHONPATH (what ``pip install`` would leave behind)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "bench_noop_plugin.py").write_text(
        "from orchestrator.hookspecs import hookimpl\n"
        "from orchestrator.tools import Tool\n\n"
        "@hookimpl\n"
        "def register_tools(leg):\n"
        "    return [Tool(name='noop', description='Does nothing.', parameters={'type': "
        "'object', 'properties': {'n': {'type': 'integer'}}}, function=lambda n=0: 'ok')]\n",
        encoding="utf-8")
    dist = root / "bench_noop-0.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-noop\nVersion: 0.0\n",
                                   encoding="utf-8")
    (dist / "entry_points.txt").write_text("[orch]\nbench_noop = bench_noop_plugin\n",
                                           encoding="utf-8")
    return root


def run_cli(url: str, home: Path, models: list[str], *, builtins: bool,
            max_concurrent: int | None) -> float:
    orch = os.path.join(os.path.dirname(sys.executable), "orch")
    env = {**os.environ, **OFFLINE, **plugin_env(builtins), "ORCH_HOME": str(home),
           "PYTHONPATH": str(cli_plugin_dir(home / "plugin"))}
    subprocess.run([orch, "provider", "add", PROVIDER, "--base-url", url], env=env,
                   check=True, capture_output=True)
    config = home / "config.json"  # no CLI flag for the gate's ceiling yet
    data = json.loads(config.read_text(encoding="utf-8"))
    data["providers"][PROVIDER] = provider_entry(url, max_concurrent)
    config.write_text(json.dumps(data), encoding="utf-8")
    argv = [orch, "fanout", "--models", ",".join(f"{PROVIDER}/{m}" for m in models),
            "--prompt", "Benchmark briefing: call noop, then answer.", "--json",
            "--max-legs", str(max(len(models), 10))]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"orch fanout exited {proc.returncode}: {proc.stderr[-500:]}")
    doc = json.loads(proc.stdout)
    steps = {leg["requests"] for leg in doc["legs"]}
    if steps != {STEPS}:
        raise RuntimeError(f"orch fanout legs made {steps} requests, expected {STEPS}")
    return wall


def bare_child(url: str, models: list[str]) -> None:
    """The end-to-end limit: a fresh interpreter that imports litellm and gathers the chains."""
    import litellm

    litellm.suppress_debug_info = True
    run_bare(litellm, url, models)


def run_bare_process(url: str, models: list[str]) -> float:
    argv = [sys.executable, __file__, "--bare-child", url, ",".join(models)]
    t0 = time.perf_counter()
    subprocess.run(argv, env={**os.environ, **OFFLINE}, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    if sys.argv[1:2] == ["--bare-child"]:
        offline()
        return bare_child(sys.argv[2], sys.argv[3].split(","))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="1,8,32,64", help="wave sizes (comma-separated)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per N and side")
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--cli-n", type=int, default=8, help="legs for the orch fanout run "
                        "(0: skip it)")
    parser.add_argument("--no-builtins", action="store_true",
                        help="load no built-in plugins in the engine runs")
    parser.add_argument("--max-concurrent", type=int, default=None,
                        help="the provider's rate-gate ceiling (default: the largest N, so "
                        "the gate admits the whole wave; 0: orch's default ceiling)")
    args = parser.parse_args()
    ns = [int(n) for n in args.ns.split(",")]
    ceiling = max(ns + [args.cli_n]) if args.max_concurrent is None else args.max_concurrent
    offline()

    per_round = sum(ns) * 3
    names = ModelNames("w", 2 + per_round * (args.reps + 1) + 2 * args.cli_n)
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        script = write_script(tmp / "script.json", names.all(), STEPS)
        with scripted_server(latency_ms=args.latency_ms, script=script) as url:
            cfg, pm = engine_setup(tmp / "home", url, builtins=not args.no_builtins,
                                   max_concurrent=ceiling or None)
            from orchestrator.runtime import litellm

            lm = litellm()
            runs = tmp / "home" / "runs"
            # Warm-up: first HTTP session, first ledger open, lazy imports on the request path.
            run_engine(cfg, pm, runs, names.take(1))
            run_bare(lm, url, names.take(1))
            for n in ns:
                engine_s, bare_s, engine_rss, bare_rss, priced_s = [], [], [], [], []
                for rep in range(args.reps):
                    sides = [("engine", run_engine, (cfg, pm, runs)), ("bare", run_bare, (lm, url)),
                             ("priced", run_bare_priced, (lm, url))]
                    for side, fn, fixed in (sides if rep % 2 == 0 else sides[::-1]):
                        wall, rss = timed(fn, *fixed, names.take(n))
                        if side == "priced":
                            priced_s.append(wall)
                            continue
                        (engine_s if side == "engine" else bare_s).append(wall)
                        (engine_rss if side == "engine" else bare_rss).append(rss)
                results[n] = {
                    "engine_s": engine_s, "bare_s": bare_s,
                    "engine_median_s": statistics.median(engine_s),
                    "bare_median_s": statistics.median(bare_s),
                    "bare_priced_s": priced_s,
                    "bare_priced_median_s": statistics.median(priced_s),
                    "engine_rss_delta_mb": max(engine_rss), "bare_rss_delta_mb": max(bare_rss),
                    "engine_tracemalloc_peak_mb": traced_peak_mb(run_engine, cfg, pm, runs,
                                                                 names.take(n)),
                    "bare_tracemalloc_peak_mb": traced_peak_mb(run_bare, lm, url, names.take(n)),
                }
                r = results[n]
                r["ratio"] = r["engine_median_s"] / r["bare_median_s"]
                r["ratio_priced"] = r["engine_median_s"] / r["bare_priced_median_s"]
                print(f"  N={n}: engine {r['engine_median_s']:.2f} s, bare "
                      f"{r['bare_median_s']:.2f} s, ratio {r['ratio']:.3f}; bare given the "
                      f"prices {r['bare_priced_median_s']:.2f} s, ratio "
                      f"{r['ratio_priced']:.3f}", flush=True)
            cli = None
            if args.cli_n:
                cli = {"n": args.cli_n,
                       "wall_s": run_cli(url, tmp / "cli-home", names.take(args.cli_n),
                                         builtins=not args.no_builtins,
                                         max_concurrent=ceiling or None),
                       "bare_process_s": run_bare_process(url, names.take(args.cli_n))}

    one = results[ns[0]]["engine_median_s"] if ns[0] == 1 else None
    print(f"\n{args.reps} runs per cell, median; {STEPS} steps per leg at "
          f"{args.latency_ms:g} ms latency; memory = tracemalloc peak (RSS high-water delta)")
    print(f"{'N':>3} {'engine s':>9} {'bare s':>7} {'engine/bare':>12} {'vs 1 leg':>9} "
          f"{'engine MiB':>16} {'bare MiB':>16}")
    for n, r in results.items():
        vs_one = f"{r['engine_median_s'] / one:.2f}x" if one else "-"
        r["engine_vs_one_leg"] = r["engine_median_s"] / one if one else None
        print(f"{n:>3} {r['engine_median_s']:>9.2f} {r['bare_median_s']:>7.2f} "
              f"{r['ratio']:>11.3f}x {vs_one:>9} "
              f"{r['engine_tracemalloc_peak_mb']:>7.1f} ({r['engine_rss_delta_mb']:>5.1f}) "
              f"{r['bare_tracemalloc_peak_mb']:>7.1f} ({r['bare_rss_delta_mb']:>5.1f})")
    worst = max(r["ratio"] for r in results.values())
    verdict = "meets" if worst <= TARGET_RATIO else "MISSES"
    print(f"worst engine/bare {worst:.3f}x: {verdict} the {TARGET_RATIO}x target")
    worst_priced = max(r["ratio_priced"] for r in results.values())
    print(f"worst engine/bare given the prices (orch's own overhead): {worst_priced:.3f}x")
    if cli:
        n = cli["n"]
        ref = results.get(n)
        extra = (f" = {cli['wall_s'] / ref['bare_median_s']:.2f}x the bare gather, "
                 f"{cli['wall_s'] / ref['engine_median_s']:.2f}x in-process") if ref else ""
        print(f"orch fanout, {n} legs, end to end (start-up included): "
              f"{cli['wall_s']:.2f} s{extra}")
        print(f"bare gather in a fresh interpreter (import litellm included): "
              f"{cli['bare_process_s']:.2f} s; orch fanout / that = "
              f"{cli['wall_s'] / cli['bare_process_s']:.2f}x")
    write_result("wave" if ceiling else "wave_default_gate", {
        "machine": machine(), "steps": STEPS, "latency_ms": args.latency_ms,
        "reps": args.reps, "builtins": not args.no_builtins, "max_concurrent": ceiling or None,
        "results": {str(n): r for n, r in results.items()}, "worst_ratio": worst, "worst_ratio_priced": worst_priced,
        "target_ratio": TARGET_RATIO, "meets_target": worst <= TARGET_RATIO, "cli": cli,
    })


if __name__ == "__main__":
    main()
