"""A 64-leg wave against a server that allows 8 requests in flight and answers 429 beyond:
requests sent and wall time with the rate-limit gate, against without it.

Run by hand: ``.venv/bin/python bench/bench_gate.py [--legs 64] [--runs 3]``. Three
ways to meet the limit, interleaved run by run so background load hits all alike:

- ``gate``: orch's shared gate (starts at 16, halves on a 429, +1 per 3 successes), SDK
  retries off;
- ``sdk retries``: no gate, the OpenAI SDK's own retries (``max_retries=6``: each caller
  retries on its own, honouring Retry-After) - what a wave does without a shared gate;
- ``no retries``: no gate, no retries: every 429 is a failed leg.

The scripted server runs in this process (it counts every request, 429s included); each reply
takes ``--latency`` seconds and a 429 says ``Retry-After: --retry-after``. Writes
bench/results/gate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, offline, write_result

ROOT = Path(__file__).resolve().parent.parent


def one_wave(srv, legs: int, mode: str, runs_dir: Path) -> dict:
    import anyio

    from orchestrator import runtime
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models import gate
    from orchestrator.models.resolve import resolve_all
    from orchestrator.models.server import Server
    from orchestrator.plugin_host.plugins import load

    gate.reset()
    srv.reset()
    srv.max_in_flight(SERVER_LIMIT, retry_after=ARGS.retry_after)
    cfg = runtime.config()
    pm = load(enabled=False)
    models = resolve_all([f"bench/m{i}" for i in range(legs)], cfg, pm)
    class SdkRetries(Server):
        """No gate; the OpenAI SDK's own retries (orch's num_retries=0 would turn them off)."""

        def call_kwargs(self, model, admitted):
            kwargs = super().call_kwargs(model, admitted)
            kwargs.pop("num_retries", None)
            return kwargs

    server = {"gate": Server(timeout_s=300),
              "sdk retries": SdkRetries(timeout_s=300, rate_gate=False, max_retries=6),
              "no retries": Server(timeout_s=300, rate_gate=False)}[mode]
    wave = Wave(WaveSpec(models=models, briefing="Say hello.", runs_dir=runs_dir,
                         timeout_s=300, max_steps=1), pm=pm, config=cfg, server=server)
    t0 = time.perf_counter()
    doc = anyio.run(wave.run)
    wall = time.perf_counter() - t0
    statuses = [r.status for r in srv.requests]
    return {"wall_s": wall, "requests": len(statuses), "429s": statuses.count(429),
            "complete": sum(leg["status"] == "complete" for leg in doc["legs"]),
            "server_peak": srv.peak_in_flight}


def main() -> None:
    global ARGS, SERVER_LIMIT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legs", type=int, default=64)
    parser.add_argument("--limit", type=int, default=8, help="requests the server allows")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per reply")
    parser.add_argument("--retry-after", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=3)
    ARGS = parser.parse_args()
    SERVER_LIMIT = ARGS.limit
    offline()
    sys.path.insert(0, str(ROOT))
    from orchestrator.app.warm import import_litellm_quietly
    from orchestrator.testing.scripted_server import Reply, ScriptedServer

    modes = ("gate", "sdk retries", "no retries")
    samples: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as home, \
            ScriptedServer(latency=ARGS.latency) as srv:
        os.environ["ORCH_HOME"] = home
        Path(home, "config.json").write_text(json.dumps(
            {"providers": {"bench": {"base_url": srv.url}}}))
        import_litellm_quietly()
        srv.default = Reply(text="hello")
        for mode in modes:  # warm litellm's client, its 429 path and imports, in every mode
            one_wave(srv, 12, mode, Path(home) / "runs")
        for run in range(ARGS.runs):
            for mode in modes:
                result = one_wave(srv, ARGS.legs, mode, Path(home) / "runs")
                samples[mode].append(result)
                print(f"run {run + 1} {mode:<12} {result['wall_s']:6.2f} s "
                      f"{result['requests']:4d} requests {result['429s']:4d} x 429 "
                      f"{result['complete']:3d}/{ARGS.legs} complete", flush=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(s[key] for s in samples[mode])

    base_wall, base_req = med("gate", "wall_s"), med("gate", "requests")
    ideal = ARGS.legs / ARGS.limit * ARGS.latency
    print(f"\n{ARGS.legs} legs, server allows {ARGS.limit} in flight, {ARGS.latency:g} s a reply "
          f"(ideal {ideal:.1f} s), Retry-After {ARGS.retry_after:g} s; medians of {ARGS.runs}")
    print(f"{'mode':<12} {'wall s':>7} {'requests':>9} {'429s':>6} {'complete':>9} "
          f"{'wall/gate':>10} {'req/gate':>9}")
    summary = {}
    for mode in modes:
        summary[mode] = {k: med(mode, k) for k in ("wall_s", "requests", "429s", "complete")}
        s = summary[mode]
        print(f"{mode:<12} {s['wall_s']:>7.2f} {s['requests']:>9.0f} {s['429s']:>6.0f} "
              f"{s['complete']:>9.0f} {s['wall_s'] / base_wall:>9.2f}x "
              f"{s['requests'] / base_req:>8.2f}x")
    write_result("gate", {"machine": machine(), "legs": ARGS.legs, "server_limit": ARGS.limit,
                          "latency_s": ARGS.latency, "retry_after_s": ARGS.retry_after,
                          "runs": ARGS.runs, "ideal_wall_s": ideal, "median": summary,
                          "samples": samples})


ARGS: argparse.Namespace
SERVER_LIMIT = 8

if __name__ == "__main__":
    main()
