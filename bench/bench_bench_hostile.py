"""`orch bench` against hostile checks and contestants: its peak memory and its wall time.

Run by hand: ``.venv/bin/python bench/bench_bench_hostile.py [--mb 300] [--yes-s 4]``.

One real ``orch bench`` process (the CLI, confined under bubblewrap where it runs, else with
``--unsafe-checks``) over two tasks - one graded by a ``python`` check that hangs, one by a
check that calls ``sys.exit(0)`` - and four command contestants: one that prints ``--mb``
megabytes and exits, ``yes`` with a ``--yes-s`` limit (it must end ``error``/``timeout``, never ``complete``), a ``claude-json`` CLI that prints
nothing, and a well-behaved one. The orch process's high-water RSS (VmHWM, read from /proc
every 50 ms) is the figure; target under 300 MB. Before issue 26 the 300 MB printer took
1.25 GB and ``yes`` 2.26 GB.

Writes bench/results/bench_hostile.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import machine, offline, write_result

TARGET_MB = 300.0


def setup(root: Path, mb: int, yes_s: float) -> Path:
    cases = root / "cases"
    cases.mkdir()
    (cases / "checks_b.py").write_text(
        "import sys, time\n"
        "def hang(answer):\n    time.sleep(10**6)\n"
        "def leave(answer):\n    sys.exit(0)\n")
    for name in ("hang", "leave"):
        (cases / f"{name}.toml").write_text(
            f'id = "{name}"\ntask = "Say PONG."\ncheck_timeout_s = 2\n'
            f'[expect]\npython = "checks_b:{name}"\n')
    huge = root / "huge.py"
    huge.write_text(f"import sys\nchunk = b'x' * (1 << 20)\nfor _ in range({mb}):\n"
                    "    sys.stdout.buffer.write(chunk)\n")
    config = root / "bench.toml"
    config.write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "ok"
        kind = "command"
        command = "echo"
        args = ["PONG"]
        stdin = false

        [[contestants]]
        name = "huge"
        kind = "command"
        command = "{sys.executable}"
        args = ["{huge}"]
        stdin = false

        [[contestants]]
        name = "yes"
        kind = "command"
        command = "yes"
        stdin = false
        timeout_s = {yes_s}

        [[contestants]]
        name = "logged-out"
        kind = "command"
        command = "true"
        parse = "claude-json"
        """))
    return config


def peak_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--yes-s", type=float, default=4.0)
    args = parser.parse_args()
    offline()
    from orchestrator.sandbox import bwrap

    unsafe = ["--unsafe-checks"] if bwrap.usable() else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = setup(root, args.mb, args.yes_s)
        out = root / "results.json"
        env = dict(os.environ, ORCH_HOME=str(root / "home"))
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "bench", "--config",
                                 str(config), "--yes", "--out", str(out), *unsafe], env=env,
                                cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        peak = 0.0
        while proc.poll() is None:
            now = peak_mb(proc.pid)
            peak = max(peak, now or 0.0)
            time.sleep(0.05)
        wall = time.monotonic() - start
        err = proc.stderr.read()
        doc = json.loads(out.read_text())
        trials = {f"{t['task']}/{t['contestant']}":
                  f"{t['status']} ({t['reason'] or 'no reason'}); printed "
                  f"{t['stdout_bytes']:,} bytes; "
                  + (f"EXCL {t['excluded']}" if t["excluded"] else
                     "PASS" if t["passed"] else "FAIL") for t in doc["trials"]}
        size = out.stat().st_size
    print(f"exit {proc.returncode}; wall {wall:.1f} s; peak RSS of orch {peak:.0f} MB "
          f"(target < {TARGET_MB:.0f} MB: {'MET' if peak < TARGET_MB else 'NOT MET'}); "
          f"results file {size:,} bytes; confinement {doc['settings']['confinement']}")
    for key, why in sorted(trials.items()):
        print(f"  {key}: {why}")
    if proc.returncode not in (0, 2):
        print(err)
    write_result("bench_hostile", {"machine": machine(), "load": os.getloadavg(),
                                   "mb": args.mb, "yes_s": args.yes_s, "exit": proc.returncode,
                                   "wall_s": wall, "peak_rss_mb": peak,
                                   "results_bytes": size, "trials": trials,
                                   "target_mb": TARGET_MB})


if __name__ == "__main__":
    main()
