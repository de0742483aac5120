"""What it costs that every process a bench check or contestant starts ends with it: one
launch of a program through ``orchestrator.sandbox.process.run`` (behind the reaper, a
``python -I -S`` subreaper) against the same program started the way ``run`` started it
before (``/bin/sh`` setting the rlimits, then exec), interleaved, median of ``--reps``.

Run by hand: ``.venv/bin/python bench/bench_reaper.py [--reps 30]``. Two programs: ``true``
(the launcher's cost alone) and ``python -c pass`` (a check's child); and ``true`` under
bubblewrap, where the sandbox's PID namespace is the boundary and no reaper runs. Also the sweep alone:
a program that leaves 20 processes behind in sessions of their own, all ended before
``run`` returns. Writes bench/results/reaper.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, write_result

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from orchestrator.sandbox import bwrap, environment  # noqa: E402
from orchestrator.sandbox.process import Limits, run  # noqa: E402

LIMITS = Limits(timeout_s=60, memory_mb=2048, file_mb=1024)


def before(argv: list[str], env: dict) -> None:
    """The launch as it was: /bin/sh sets the rlimits and execs, in a session of its own."""
    sh = ["/bin/sh", "-c", "ulimit -d 2097152 2>/dev/null; ulimit -f 2097152 2>/dev/null; "
          'exec "$@"', "sh", *argv]
    subprocess.run(sh, env=env, start_new_session=True, capture_output=True,
                   stdin=subprocess.DEVNULL, check=False)


def now(argv: list[str], env: dict) -> None:
    run(argv, cwd="/tmp", env=env, limits=LIMITS, reap=argv[0] != bwrap.found())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    env = environment.confined()
    out = {"machine": machine(), "load": os.getloadavg()[0], "programs": {}}
    programs = [("true", ["true"]), ("python -c pass", [sys.executable, "-c", "pass"])]
    if bwrap.usable() is None:
        confined = bwrap.argv(bwrap.Confinement(cwd=Path("/tmp")), ["true"], bwrap.found())
        programs.append(("bwrap true", [a for a in confined if a not in ("--json-status-fd",
                                                                         "{status-fd}")]))
    for name, argv in programs:
        times: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(args.reps):
            for label, launch in (("before", before), ("now", now)):
                start = time.perf_counter()
                launch(argv, env)
                times[label].append(time.perf_counter() - start)
        b, n = statistics.median(times["before"]), statistics.median(times["now"])
        out["programs"][name] = {"before_s": b, "now_s": n, "ratio": n / b, "added_s": n - b}
        print(f"{name:16} before {b * 1000:7.1f} ms   now {n * 1000:7.1f} ms   "
              f"×{n / b:.2f}   +{(n - b) * 1000:.1f} ms")
    script = "for i in $(seq 20); do setsid sleep 600 </dev/null >/dev/null 2>&1 & done"
    start = time.perf_counter()
    run(["sh", "-c", script], cwd="/tmp", env=env, limits=LIMITS)
    swept = time.perf_counter() - start
    out["sweep_20_escapees_s"] = swept
    print(f"20 setsid escapees ended in {swept * 1000:.0f} ms (run() returned)")
    print(f"load average {out['load']:.1f}")
    write_result("reaper", out)


if __name__ == "__main__":
    main()
