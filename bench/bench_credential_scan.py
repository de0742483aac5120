"""What the credential-content scan costs: a 64-leg wave whose tools return 12 KB of code,
scanned before each result is sent, against the same wave with the scan made a no-op.

Run by hand: ``.venv/bin/python bench/bench_credential_scan.py [--n 64] [--reps 5]``.

Each leg makes 3 requests (its tool twice, then an answer) against the scripted server in its
own process at 0 ms latency (the scan is CPU work; latency would hide it): 128 tool results of
12,000 characters each (orch's own ``plugins/workspace.py``, one planted key) per wave. "Off"
swaps ``credential_content.withhold``'s code for one that finds nothing, so every call site
stays as it is. Before the waves, one 12 KB result is timed alone through
``credential_content.withhold`` and through detect-secrets' own ``scan_line`` on each of its
lines (the per-line API orch does not use), the figure behind that choice.
Writes bench/results/credential_scan.json.
"""

from __future__ import annotations

import argparse
import gc
import statistics
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
ROOT = Path(__file__).resolve().parent.parent
RESULT = (ROOT / "plugins" / "workspace.py").read_text()[:11_940] + (
    "\nGIT = 'https://x-access-token:ghp_R7tq2VxZ9mK4pL8wN3bC6dF1gH5jS0aE2yU7@github.com'\n")


def tools_plugin():
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class CodeTools:
        @hookimpl
        def register_tools(self, leg):
            return [Tool(name="noop", description="Returns a file.",
                         parameters={"type": "object", "properties": {
                             "n": {"type": "integer"}}},
                         function=lambda n=0: RESULT)]

    return CodeTools()


def _nothing(text):
    return Withheld(text, ())  # noqa: F821 - resolved in credential_content's globals


class Scan:
    """Switch the scan off (finds nothing) and back on, in place."""

    def __init__(self) -> None:
        from orchestrator.security import credential_content

        self.func = credential_content.withhold
        self.code = self.func.__code__
        self.off = _nothing.__code__  # run with withhold's globals: Withheld is there

    def set(self, on: bool) -> None:
        self.func.__code__ = self.code if on else self.off


def alone(reps: int = 20) -> dict[str, float]:
    """One 12 KB result: withhold (ms) and detect-secrets' scan_line over its lines (ms)."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    from orchestrator.security.credential_content import withhold

    withhold(RESULT)
    t0 = time.perf_counter()
    for _ in range(reps):
        assert withhold(RESULT).rules == ("url-credentials",)
    ours = (time.perf_counter() - t0) / reps * 1000
    with default_settings():
        lines = RESULT.splitlines()
        list(scan_line(lines[0]))
        t0 = time.perf_counter()
        for line in lines:
            list(scan_line(line))
        theirs = (time.perf_counter() - t0) * 1000
    return {"withhold_ms": ours, "detect_secrets_scan_line_ms": theirs, "lines": len(lines)}


def run(cfg, pm, runs: Path, models: list[str]) -> None:
    import anyio

    wave = engine_wave(cfg, pm, runs, models)
    doc = anyio.run(wave.run)
    if doc["status"] != "complete" or {leg["requests"] for leg in doc["legs"]} != {STEPS}:
        raise RuntimeError(f"the wave did not run {STEPS} steps per leg: {doc['status']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="legs per wave")
    parser.add_argument("--reps", type=int, default=5, help="timed waves per side")
    args = parser.parse_args()
    offline()
    single = alone()
    print(f"one 12 KB result: withhold {single['withhold_ms']:.2f} ms; detect-secrets "
          f"scan_line over its {single['lines']} lines {single['detect_secrets_scan_line_ms']:.0f}"
          " ms")
    names = ModelNames("c", args.n * (2 * args.reps + 2))
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        script = write_script(tmp / "script.json", names.all(), STEPS)
        with scripted_server(latency_ms=0, script=script) as url:
            cfg, pm = engine_setup(tmp / "home", url, max_concurrent=args.n)
            pm.unregister(name="bench_noop")
            pm.register(tools_plugin(), name="bench_noop")
            switch = Scan()
            runs = tmp / "home" / "runs"
            for on in (True, False):  # warm-up
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
    print(f"{args.n} legs x {STEPS} steps ({args.n * (STEPS - 1)} results of 12 KB), "
          f"{args.reps} waves per side, median: scan on {on:.2f} s, off {off:.2f} s, ratio "
          f"{on / off:.3f}x; CPU of this process on {cpu_on:.2f} s, off {cpu_off:.2f} s, "
          f"ratio {cpu_on / cpu_off:.3f}x")
    write_result("credential_scan", {
        "machine": machine(), "n": args.n, "steps": STEPS, "reps": args.reps, **single,
        "times": times, "cpu": cpu, "on_median_s": on, "off_median_s": off,
        "ratio": on / off, "cpu_ratio": cpu_on / cpu_off})


if __name__ == "__main__":
    main()
