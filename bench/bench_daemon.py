"""`orch serve`: what a warm daemon saves, side by side in one run.

Run by hand: ``.venv/bin/python bench/bench_daemon.py [--reps 7] [--llm PATH]``.

1. One single-leg ``orch fanout`` at 0 ms latency, process wall and peak RSS of the process
   the user starts: through a warm daemon (the client), in-process (``--no-daemon``), and
   ``llm -m … hi`` (simonw/llm; pass ``--llm`` the path of an ``llm`` installed in some venv,
   configured here for the scripted server through ``extra-openai-models.yaml``). Target:
   the daemon's ≤ 0.3 s.
2. A 64-leg wave (3 steps a leg, ``noop`` tool calls, 1,000 ms latency) through the daemon,
   client wall, against the bare litellm gather of the same requests in this process (as
   bench/bench_wave.py), and against the same wave run by the engine in this process
   (bench_wave.py's engine side). Target ≤ 1.15×. A second bare gather is given the
   per-token prices orch's Server passes a declared endpoint (``_common.PRICED``): litellm
   then skips the price-map search that, for a name it does not know, formats a traceback
   per answer, so the ratio against it is orch's own overhead alone. Every ``orch`` runs from
   a directory outside any git work tree, so a leg offers only ``noop``, as bare_chain does.
3. Two concurrent clients of 16 legs against a server that answers 429 beyond 8 requests in
   flight: the 429s of both together, through the daemon (one shared gate) and in-process
   (two gates), against one client alone. Target (daemon) ≤ 1.25×.

4. ``daemon: auto``, the default: with no configuration, in a fresh ORCH_HOME and runtime
   directory each time, the first single-leg ``orch fanout`` (cold, in-process; it starts the
   daemon) and the second (through that daemon, once it answers). Target: the second ≤ 0.3 s.

Runs alternate between the sides so background load hits them alike; medians are reported.
Writes bench/results/daemon.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    OFFLINE,
    PRICED,
    PROVIDER,
    ModelNames,
    engine_setup,
    machine,
    offline,
    plugin_env,
    provider_entry,
    scripted_server,
    write_result,
    write_script,
)
from bench_wave import STEPS, bare_chain, cli_plugin_dir, run_engine

ORCH = os.path.join(os.path.dirname(sys.executable), "orch")
# Every `orch` runs from a directory outside any git work tree: no workspace there, so a leg
# offers only the ``noop`` tool and sends the requests bare_chain sends. From inside this
# checkout it would also offer the read-only workspace tools (glob, grep, list, read): six
# times the request body, a different request from the baseline's.
CWD: dict[str, str] = {}


def timed_process(argv: list[str], env: dict) -> tuple[float, float, dict]:
    """(wall s, peak RSS MiB, {pid, stdout, stderr}) of one process, as the user's shell
    sees it; the RSS is that child's own high-water mark (wait4)."""
    import threading

    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=CWD.get("cwd"))
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream) -> None:
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s))
               for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    done = {"pid": proc.pid, "stdout": chunks["stdout"].decode(),
            "stderr": chunks["stderr"].decode()}
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {done['stderr'][-400:]}")
    return wall, usage.ru_maxrss / 1024, done


def llm_setup(llm: str, url: str, tmp: Path) -> tuple[list[str], dict]:
    home = tmp / "llm-home"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: scripted\n  model_name: m\n  api_base: \"{url}\"\n", encoding="utf-8")
    env = {**os.environ, "LLM_USER_PATH": str(home), "OPENAI_API_KEY": "sk-bench"}
    return [llm, "-m", "scripted", "--no-stream", "--no-log", "hi"], env


def single_leg(url: str, env: dict, reps: int, llm: str | None, tmp: Path) -> dict:
    daemon = [ORCH, "fanout", "-m", f"{PROVIDER}/m", "-p", "hi"]
    sides = {"daemon": (daemon, env), "in_process": ([*daemon, "--no-daemon"], env)}
    if llm:
        sides["llm"] = llm_setup(llm, url, tmp)
    walls: dict[str, list[float]] = {k: [] for k in sides}
    rss: dict[str, list[float]] = {k: [] for k in sides}
    for argv, side_env in sides.values():  # warm-up: caches, page cache
        timed_process(argv, side_env)
    for rep in range(reps):
        order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for name in order:
            argv, side_env = sides[name]
            wall, peak, _ = timed_process(argv, side_env)
            walls[name].append(wall)
            rss[name].append(peak)
    out = {}
    for name in sides:
        out[name] = {"wall_s": walls[name], "median_s": statistics.median(walls[name]),
                     "peak_rss_mb": max(rss[name])}
        print(f"  single leg, {name}: {out[name]['median_s']:.3f} s median, peak RSS "
              f"{out[name]['peak_rss_mb']:.0f} MiB", flush=True)
    return out


def bare_gather(url: str, models: list[str], **extra) -> float:
    from orchestrator.runtime import litellm

    lm = litellm()

    async def gather():
        return await asyncio.gather(*(bare_chain(lm, url, m, STEPS, **extra) for m in models))

    t0 = time.perf_counter()
    asyncio.run(gather())
    return time.perf_counter() - t0


def wave_through_daemon(env: dict, models: list[str], *, daemon: bool = True) -> float:
    argv = [ORCH, "fanout", "--models", ",".join(f"{PROVIDER}/{m}" for m in models),
            "--prompt", "Benchmark briefing: call noop, then answer.", "--json",
            "--max-legs", str(len(models)), *([] if daemon else ["--no-daemon"])]
    wall, _, done = timed_process(argv, env)
    doc = json.loads(done["stdout"])
    if {leg["requests"] for leg in doc["legs"]} != {STEPS} or \
            (doc["pid"] == done["pid"]) == daemon:
        raise RuntimeError("the wave did not run 3 steps a leg where it should have")
    from datetime import datetime

    inside = (datetime.fromisoformat(doc["ended_at"]) -
              datetime.fromisoformat(doc["created_at"])).total_seconds()
    # the wave from its directory's creation to its end, without the process around it
    WAVE_INSIDE["daemon" if daemon else "cli"].append(inside)
    return wall


WAVE_INSIDE: dict[str, list[float]] = {"daemon": [], "cli": []}


def rate_limited(env: dict, names: ModelNames, clients: int, legs: int, daemon: bool) -> int:
    """429s the gate(s) saw (retries in wave.json) when ``clients`` fan out at once."""
    procs = []
    for _ in range(clients):
        argv = [ORCH, "fanout", "--models", ",".join(f"{PROVIDER}/{m}" for m in
                                                     names.take(legs)),
                "-p", "hi", "--json", "--max-legs", str(legs)]
        if not daemon:
            argv.append("--no-daemon")
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=CWD.get("cwd")))
    total = 0
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"fanout exited {proc.returncode}: {err[-300:]}")
        gate = json.loads(out)["server"]["rate_gate"]
        total += sum(entry["retries"] for entry in gate.values())
    return total


def start_daemon(env: dict) -> None:
    subprocess.run([ORCH, "serve", "start"], env=env, check=True, capture_output=True)


def stop_daemon(env: dict) -> None:
    subprocess.run([ORCH, "serve", "stop"], env=env, capture_output=True)


def part_single(args, env: dict, home: Path, tmp: Path) -> dict:
    print("1. single-leg fanout at 0 ms", flush=True)
    with scripted_server(latency_ms=0, script=write_script(tmp / "s0.json", [], 1)) as url:
        declare(home, url, None)
        start_daemon(env)
        try:
            return single_leg(url, env, args.reps, args.llm, tmp)
        finally:
            stop_daemon(env)


def part_wave(args, env: dict, home: Path, tmp: Path) -> dict:
    print(f"2. a {args.legs}-leg wave at 1,000 ms: daemon client, engine in-process, bare",
          flush=True)
    names = ModelNames("d", 3 + args.legs * 4 * (args.wave_reps + 1))
    script = write_script(tmp / "s1.json", names.all(), STEPS)
    daemon_s, bare_s, priced_s, engine_s = [], [], [], []
    with scripted_server(latency_ms=1000, script=script) as url:
        declare(home, url, args.legs)
        start_daemon(env)
        try:
            engine = engine_setup(tmp / "engine-home", url, max_concurrent=args.legs)
            runs = tmp / "engine-home" / "runs"
            wave_through_daemon(env, names.take(1))  # warm: the first HTTP session
            bare_gather(url, names.take(1))
            run_engine(*engine, runs, names.take(1))

            def in_process() -> None:
                t0 = time.perf_counter()
                run_engine(*engine, runs, names.take(args.legs))
                engine_s.append(time.perf_counter() - t0)

            sides = [lambda: daemon_s.append(wave_through_daemon(env, names.take(args.legs))),
                     lambda: bare_s.append(bare_gather(url, names.take(args.legs))),
                     lambda: priced_s.append(bare_gather(url, names.take(args.legs), **PRICED)),
                     in_process,
                     lambda: wave_through_daemon(env, names.take(args.legs), daemon=False)]
            for rep in range(args.wave_reps):
                for run in (sides if rep % 2 == 0 else sides[::-1]):
                    run()
        finally:
            stop_daemon(env)
    bare, priced = statistics.median(bare_s), statistics.median(priced_s)
    out = {"legs": args.legs, "daemon_s": daemon_s, "bare_s": bare_s,
           "bare_priced_s": priced_s,
           "engine_in_process_s": engine_s, "ratio": statistics.median(daemon_s) / bare,
           "engine_ratio": statistics.median(engine_s) / bare,
           "ratio_priced": statistics.median(daemon_s) / priced,
           "engine_ratio_priced": statistics.median(engine_s) / priced,
           "daemon_wave_inside_s": WAVE_INSIDE["daemon"][1:],
           "in_process_cli_wave_inside_s": WAVE_INSIDE["cli"]}
    print(f"  daemon client {statistics.median(daemon_s):.2f} s, engine in this process "
          f"{statistics.median(engine_s):.2f} s, bare {bare:.2f} s: {out['ratio']:.3f}x and "
          f"{out['engine_ratio']:.3f}x; the CLI's wave itself took "
          f"{statistics.median(WAVE_INSIDE['daemon'][1:]):.2f} s in the daemon, "
          f"{statistics.median(WAVE_INSIDE['cli']):.2f} s in `orch fanout --no-daemon`",
          flush=True)
    print(f"  bare given the prices orch passes a declared endpoint {priced:.2f} s: daemon "
          f"{out['ratio_priced']:.3f}x, engine {out['engine_ratio_priced']:.3f}x (orch's own "
          "overhead, litellm's price-map miss taken out of both)", flush=True)
    return out


def part_rate_limits(env: dict, home: Path) -> dict:
    print("3. two clients against 8 in flight, 429 beyond", flush=True)
    names = ModelNames("r", 16 * 6)
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.testing.scripted_server", "--port", "0",
         "--latency-ms", "200", "--max-in-flight", "8"], stdout=subprocess.PIPE, text=True,
        env=env)
    try:
        declare(home, server.stdout.readline().strip(), None)
        alone = rate_limited(env, names, 1, 16, daemon=False)
        two_apart = rate_limited(env, names, 2, 16, daemon=False)
        start_daemon(env)
        try:
            alone_d = rate_limited(env, names, 1, 16, daemon=True)
            two_shared = rate_limited(env, names, 2, 16, daemon=True)
        finally:
            stop_daemon(env)
    finally:
        server.terminate()
        server.wait()
    print(f"  429s: one client {alone} (in-process) / {alone_d} (daemon); two clients "
          f"{two_apart} in-process, {two_shared} through the daemon", flush=True)
    return {"one_client_in_process": alone, "two_clients_in_process": two_apart,
            "one_client_daemon": alone_d, "two_clients_daemon": two_shared,
            "ratio_daemon": two_shared / max(1, alone_d),
            "ratio_in_process": two_apart / max(1, alone)}


def part_auto(args, env: dict, tmp: Path) -> dict:
    """With no daemon configuration (``ORCH_DAEMON`` unset, no ``daemon`` in config.json), in a
    fresh ORCH_HOME and runtime directory each time: the first single-leg ``orch fanout``
    (cold, in-process, starts the daemon) and the second (through it, once it answers)."""
    print("4. no configuration: the first run, then the second through the daemon it started",
          flush=True)
    argv = [ORCH, "fanout", "-m", f"{PROVIDER}/m", "-p", "hi", "--json"]
    first: list[float] = []
    second: list[float] = []
    load = [os.getloadavg()[0]]
    with scripted_server(latency_ms=0, script=write_script(tmp / "s4.json", [], 1)) as url:
        for rep in range(args.auto_reps):
            home, xdg = tmp / f"auto{rep}" / "home", tmp / f"auto{rep}" / "xdg"
            home.mkdir(parents=True)
            xdg.mkdir(mode=0o700)
            declare(home, url, None)
            run_env = {**env, "ORCH_HOME": str(home), "XDG_RUNTIME_DIR": str(xdg)}
            run_env.pop("ORCH_DAEMON", None)
            wall, _, out = timed_process(argv, run_env)
            first.append(wall)
            deadline = time.monotonic() + 120
            while subprocess.run([ORCH, "serve", "status", "--json"], env=run_env,
                                 capture_output=True).returncode != 0:
                if time.monotonic() > deadline:
                    raise SystemExit("the daemon the first run started never answered")
                time.sleep(0.2)
            status = json.loads(subprocess.run([ORCH, "serve", "status", "--json"],
                                               env=run_env, capture_output=True).stdout)
            try:
                wall, _, out = timed_process(argv, run_env)
                if json.loads(out["stdout"])["pid"] != status["pid"]:
                    raise SystemExit("the second run did not go through the daemon")
                second.append(wall)
            finally:
                stop_daemon(run_env)
    load.append(os.getloadavg()[0])
    out = {"first_wall_s": first, "second_wall_s": second,
           "first_median_s": statistics.median(first),
           "second_median_s": statistics.median(second), "load_1min": load}
    print(f"  first (cold, in-process, starts the daemon): {out['first_median_s']:.3f} s "
          f"median; second (through it): {out['second_median_s']:.3f} s median; load "
          f"{load[0]:.1f} → {load[1]:.1f}", flush=True)
    return out


def declare(home: Path, url: str, max_concurrent: int | None) -> None:
    (home / "config.json").write_text(json.dumps({"providers": {
        PROVIDER: provider_entry(url, max_concurrent)}}), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="timed runs per side")
    parser.add_argument("--wave-reps", type=int, default=3)
    parser.add_argument("--legs", type=int, default=64)
    parser.add_argument("--llm", default=shutil.which("llm"), help="an `llm` executable")
    parser.add_argument("--auto-reps", type=int, default=5,
                        help="part 4: fresh homes, each a first and a second run")
    parser.add_argument("--parts", default="1,2,3,4", help="which of the four to run")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    offline()
    results: dict = {"machine": machine(), "reps": args.reps}
    with tempfile.TemporaryDirectory(prefix="orch-bench-daemon-") as tmp:
        tmp = Path(tmp)
        home, xdg = tmp / "home", tmp / "xdg"
        xdg.mkdir(mode=0o700)
        home.mkdir()
        (tmp / "work").mkdir()
        CWD["cwd"] = str(tmp / "work")
        env = {**os.environ, **OFFLINE, **plugin_env(True), "ORCH_HOME": str(home),
               "XDG_RUNTIME_DIR": str(xdg), "PYTHONPATH": str(cli_plugin_dir(tmp / "plugin")),
               "ORCH_DAEMON": "manual"}  # parts 1-3 start their daemon themselves
        os.environ.update(env)
        if "1" in parts:
            results["single_leg"] = part_single(args, env, home, tmp)
        if "2" in parts:
            results["wave"] = part_wave(args, env, home, tmp)
        if "3" in parts:
            results["rate_limits"] = part_rate_limits(env, home)
        if "4" in parts:
            results["auto"] = part_auto(args, env, tmp)
    print()
    if "single_leg" in results:
        single = results["single_leg"]
        print("single-leg orch fanout at 0 ms, process wall (median) and peak RSS:")
        for name, r in single.items():
            print(f"  {name:<10} {r['median_s']:.3f} s  {r['peak_rss_mb']:.0f} MiB")
        print(f"daemon client: {single['daemon']['median_s']:.3f} s ("
              f"{'meets' if single['daemon']['median_s'] <= 0.3 else 'MISSES'} the 0.3 s "
              "target)")
    if "wave" in results:
        w = results["wave"]
        print(f"{w['legs']}-leg wave through the daemon / bare gather: {w['ratio']:.3f}x "
              f"({'meets' if w['ratio'] <= 1.15 else 'MISSES'} the 1.15x target); in-process "
              f"engine / bare: {w['engine_ratio']:.3f}x; against the bare gather given the "
              f"same prices: daemon {w['ratio_priced']:.3f}x "
              f"({'meets' if w['ratio_priced'] <= 1.15 else 'MISSES'} 1.15x), engine "
              f"{w['engine_ratio_priced']:.3f}x")
    if "rate_limits" in results:
        rl = results["rate_limits"]
        print(f"two clients' 429s / one client's: daemon {rl['ratio_daemon']:.2f}x "
              f"({'meets' if rl['ratio_daemon'] <= 1.25 else 'MISSES'} 1.25x), in-process "
              f"{rl['ratio_in_process']:.2f}x")
    if "auto" in results:
        a = results["auto"]
        print(f"no configuration: first run {a['first_median_s']:.3f} s (cold, in-process), "
              f"second {a['second_median_s']:.3f} s through the daemon the first started ("
              f"{'meets' if a['second_median_s'] <= 0.3 else 'MISSES'} the 0.3 s target)")
    write_result("daemon", results)


if __name__ == "__main__":
    main()
