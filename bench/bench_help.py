"""`orch --help` and `orch fanout --help` wall time against `python -c pass`, median of N
runs (target <= 0.15 s each on an idle machine), and a shell completion (TAB after
`orch fanout --models `, target < 0.2 s). The load average is recorded beside the figures:
on a shared machine the ratio to `python -c pass` is the number to compare.

Run by hand: ``.venv/bin/python bench/bench_help.py [--runs 10]``. Both commands run
from the same virtual environment, with a throw-away ORCH_HOME, so the ratio is start-up
cost orch adds on top of the interpreter's own. The ORCH_HOME exists, as for anyone who has
run orch, so the plugins' declared options are remembered there (plugin_host/option_cache.py);
"fanout --help, unread" is the same command with no ORCH_HOME, reading every declaring plugin
(the first run after an install or an edit).

Bytecode: an installed orch has its .pyc files (pip compiles them; an editable install
writes them on first import). This machine sets PYTHONDONTWRITEBYTECODE=1, which would make
every run compile every module from source, so the timed runs use a bench-owned
PYTHONPYCACHEPREFIX, filled by an untimed warm-up. The same command with no bytecode at all
is shown for reference, as this machine runs it (PYTHONDONTWRITEBYTECODE=1, orch's modules
compiled from source at every start). Writes bench/results/help.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import machine, write_result

TARGET_S = 0.15
COMPLETE_TARGET_S = 0.2


def wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    bindir = os.path.dirname(sys.executable)
    orch = os.path.join(bindir, "orch")
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base.update({"ORCH_HOME": os.path.join(tmp, "home"), "LITELLM_OFFLINE_MODE": "true",
                     "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"})
        os.makedirs(base["ORCH_HOME"])  # a used orch: the declared options are remembered
        cached = {**base, "PYTHONPYCACHEPREFIX": os.path.join(tmp, "pyc")}
        fresh = {**cached, "ORCH_HOME": os.path.join(tmp, "never")}  # no ORCH_HOME: read all
        no_pyc = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
        tab = {**cached, "_ORCH_COMPLETE": "bash_complete",
               "COMP_WORDS": "orch fanout --models ", "COMP_CWORD": "3"}
        commands = {"python -c pass": ([sys.executable, "-c", "pass"], cached),
                    "orch --help": ([orch, "--help"], cached),
                    "orch fanout --help": ([orch, "fanout", "--help"], cached),
                    "fanout --help, unread": ([orch, "fanout", "--help"], fresh),
                    "orch --help, no .pyc": ([orch, "--help"], no_pyc),
                    "TAB: fanout --models": ([orch], tab)}
        for argv, env in commands.values():  # warm the page cache, write the .pyc files
            wall(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved, so background load hits all alike
            for name, (argv, env) in commands.items():
                samples[name].append(wall(argv, env))

    base = statistics.median(samples["python -c pass"])
    help_s = statistics.median(samples["orch --help"])
    fanout_s = statistics.median(samples["orch fanout --help"])
    load = os.getloadavg()
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6}")
    for name, xs in samples.items():
        print(f"{name:<22} {statistics.median(xs):>9.3f} {min(xs):>7.3f} {max(xs):>7.3f} "
              f"{statistics.median(xs) / base:>5.1f}x")
    verdict = "meets" if help_s <= TARGET_S else "MISSES"
    print(f"orch --help = {help_s / base:.1f}x python -c pass; "
          f"{verdict} the {TARGET_S} s target ({args.runs} runs)")
    verdict = "meets" if fanout_s <= TARGET_S else "MISSES"
    print(f"orch fanout --help = {fanout_s / base:.1f}x python -c pass; "
          f"{verdict} the {TARGET_S} s target")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    tab_s = statistics.median(samples["TAB: fanout --models"])
    verdict = "meets" if tab_s < COMPLETE_TARGET_S else "MISSES"
    print(f"completion = {tab_s / base:.1f}x python -c pass; "
          f"{verdict} the {COMPLETE_TARGET_S} s target")
    write_result("help", {
        "runs": args.runs, "machine": machine(), "load_average": load,
        "median_s": {name: statistics.median(xs) for name, xs in samples.items()},
        "samples_s": samples, "ratio": help_s / base,
        "no_pyc_ratio": statistics.median(samples["orch --help, no .pyc"]) / base,
        "target_s": TARGET_S,
        "meets_target": help_s <= TARGET_S,
        "fanout_help_ratio": fanout_s / base, "fanout_help_meets_target": fanout_s <= TARGET_S,
        "completion_ratio": tab_s / base, "completion_target_s": COMPLETE_TARGET_S,
        "completion_meets_target": tab_s < COMPLETE_TARGET_S,
    })


if __name__ == "__main__":
    main()
