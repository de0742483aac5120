"""What scrubbing costs: a 64-leg wave with every artifact, ledger row and stdout scrubbed,
against the same wave with the scrubbers made no-ops (the baseline, same run, interleaved).

Run by hand: ``.venv/bin/python bench/bench_scrub.py [--n 64] [--reps 5]``.

Each leg makes 3 requests (``noop`` twice, then an answer) against the scripted server in its
own process at ``--latency-ms`` (default 0: scrubbing is CPU work, and latency would hide it).
The briefing carries a 16 KB context, so every request, conversation.jsonl line and tool
result holds real text; four keys are registered (three from the environment, one read as a
declared provider's key), as in a set-up with a few providers. After each wave the ``--json``
document is printed into a buffer through the scrubbed stdout, as ``orch fanout --json`` does.
"Off" swaps the three scrubbers' code for the identity, so every call site stays as it is.
Wall time and this process's CPU time are both reported: on a loaded machine the CPU time
(the scripted server runs in its own process) is the steadier measure of the work added.
Writes bench/results/scrub.json.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    ModelNames,
    engine_setup,
    engine_wave,
    machine,
    offline,
    scripted_server,
    write_result,
    write_script,
)

STEPS = 3
CONTEXT = "".join(f"def handler_{n}(request):  # route /api/v1/items/{n}\n    return {n}\n"
                  for n in range(400))[:16_000]


def keys() -> None:
    os.environ.update({"BENCH_OPENAI_API_KEY": "sk-bench-0123456789abcdefghijklmnop",
                       "BENCH_TOGETHER_APIKEY": "tg-bench-9876543210zyxwvutsrqpo",
                       "BENCH_OPENROUTER_AUTH": "or-bench-5555666677778888aaaa"})
    from orchestrator.security.secrets import register, secret_values

    register("declared-provider-key-0011223344556677", "$BENCH_DECLARED_KEY")
    assert len(secret_values()) >= 4


class Scrubbing:
    """Switch the scrubbers off (identity) and back on, in place."""

    def __init__(self) -> None:
        from orchestrator.security import secrets

        self.funcs = (secrets.scrub, secrets.scrub_values, secrets.scrub_doc)
        self.code = [f.__code__ for f in self.funcs]

    def set(self, on: bool) -> None:
        identity = {"scrub": lambda text: text, "scrub_values": lambda text: text,
                    "scrub_doc": lambda value, field=None: value}
        for f, code in zip(self.funcs, self.code, strict=True):
            f.__code__ = code if on else identity[f.__name__].__code__


def run(cfg, pm, runs: Path, models: list[str]) -> None:
    import anyio

    from orchestrator.cli.common import print_json
    from orchestrator.security.scrubbed_io import ScrubbedStream

    wave = engine_wave(cfg, pm, runs, models)
    wave.spec.briefing = f"Benchmark: call noop, then answer.\n\n## Context\n\n{CONTEXT}"
    for leg in wave.legs:
        leg.ctx.briefing = wave.spec.briefing
    doc = anyio.run(wave.run)
    if doc["status"] != "complete" or {leg["requests"] for leg in doc["legs"]} != {STEPS}:
        raise RuntimeError(f"the wave did not run {STEPS} steps per leg: {doc['status']}")
    out, sys.stdout = sys.stdout, ScrubbedStream(io.StringIO())
    try:
        print_json(doc)
    finally:
        sys.stdout = out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="legs per wave")
    parser.add_argument("--reps", type=int, default=5, help="timed waves per side")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    offline()
    keys()
    names = ModelNames("s", args.n * (2 * args.reps + 2))
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        script = write_script(tmp / "script.json", names.all(), STEPS)
        with scripted_server(latency_ms=args.latency_ms, script=script) as url:
            cfg, pm = engine_setup(tmp / "home", url, max_concurrent=args.n)
            switch = Scrubbing()
            runs = tmp / "home" / "runs"
            for on in (True, False):  # warm-up: first session, ledger, lazy imports
                switch.set(on)
                run(cfg, pm, runs, names.take(args.n))
            times: dict[str, list[float]] = {"on": [], "off": []}
            cpu: dict[str, list[float]] = {"on": [], "off": []}
            for rep in range(args.reps):
                for side in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    switch.set(side == "on")
                    gc.collect()
                    t0, c0 = time.perf_counter(), time.process_time()
                    run(cfg, pm, runs, names.take(args.n))
                    times[side].append(time.perf_counter() - t0)
                    cpu[side].append(time.process_time() - c0)
            switch.set(True)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    cpu_on, cpu_off = statistics.median(cpu["on"]), statistics.median(cpu["off"])
    print(f"{args.n} legs x {STEPS} steps at {args.latency_ms:g} ms, {args.reps} waves per "
          f"side, median: scrubbing on {on:.2f} s, off {off:.2f} s, ratio {on / off:.3f}x; "
          f"CPU of this process on {cpu_on:.2f} s, off {cpu_off:.2f} s, "
          f"ratio {cpu_on / cpu_off:.3f}x")
    write_result("scrub", {"machine": machine(), "n": args.n, "steps": STEPS,
                           "latency_ms": args.latency_ms, "reps": args.reps, "times": times,
                           "cpu": cpu, "on_median_s": on, "off_median_s": off,
                           "ratio": on / off, "cpu_ratio": cpu_on / cpu_off})


if __name__ == "__main__":
    main()
