"""The local model server, side by side in one run: the prebuilt server orch runs by default
(``xllamacpp``: llama.cpp's own server as a Python extension, ``python -m
orchestrator.local.prebuilt``), against a ``llama-server`` compiled by ``orch local build``
when one is built (or another binary: ``--baseline-binary``), or llama.cpp's Python server
(``llama_cpp.server``, what orch ran first: one request at a time) with ``--legacy``.

Run by hand (needs the local extra; for the compiled one ``orch local build``; for the legacy
one the ``bench-legacy`` extra)::

    python bench/bench_local.py [--tokens 64] [--reps 3] [--threads N] [--threads-batch N]
        [--server-flags "-fa off"] [--baseline-binary PATH] [--legacy] [--skip-engine]
    python bench/bench_local.py --compare-threads 1,2 [--tokens 64] [--reps 3]

Writes bench/results/local.json. Every request is the same raw-text completion of
``--tokens`` tokens (end-of-text banned through ``logit_bias``, so both servers generate
exactly that many), sent with urllib straight to the server:

- start, cold and warm: process start → the first 1-token completion answers. Cold: the GGUF
  and the server's binary (for the prebuilt one, the extension's .so) evicted from the page
  cache first (``posix_fadvise DONTNEED``).
- tokens/s of 1 request; total tokens/s of 2 concurrent requests (README command 1 is a 2-leg
  wave); total tokens/s and wall time of 4 concurrent requests; wall time of the same 4 one
  after another.
- memory: PSS and peak RSS of one server (4 slots) after the 4 concurrent requests, against
  four servers (one slot each) answering one request each at the same time.
- the engine: a 4-leg wave through orch (managed server, hooks, ledger) against 4 one-leg
  waves one after another, on the default server.
- why: the cost of one decode step with 1 busy slot and with 4, from llama.cpp's own timings
  (``predicted_per_token_ms``: every busy slot gets one token per step), and the server's CPU
  seconds per generated token. Four slots can give at most ``4 × step(1) / step(4)`` the
  tokens/s of one.

The "1 request" baseline runs on the very server (same flags, same slots) the 4 concurrent
requests use, which is what a one-leg wave gets.

``--compare-threads 1,2`` measures only that (1 request, then 4 at once, then 1 again) on the
prebuilt server for each thread count side by side, the settings alternating round by
round, each round with the load average it ran at (the machine may be shared: the load is
the figure to read them by); ``auto`` is the count orch picks now (``local.settings.
free_cores``). Writes ``bench/results/local_threads.json``. The targets (issue 15, on 2 cores) are
printed at the end, met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from _common import machine, offline, write_result

PROMPT = "Once upon a time, in a lighthouse on a rocky island, there lived"
BANNED = {"1": -100, "106": -100}  # Gemma's <eos> and <end_of_turn>
ALIAS = "gemma3-270m"


def model_path() -> Path:
    from orchestrator.local.data import models_dir
    from orchestrator.local.model import BUILTIN_FILE, BUILTIN_SHA256, assemble_builtin, sha256_file

    path = models_dir() / BUILTIN_FILE
    if not path.is_file():
        assemble_builtin(path)
    assert sha256_file(path) == BUILTIN_SHA256
    return path


def free_port() -> int:
    from orchestrator.local.manager import free_port as pick

    return pick()


def old_argv(model: Path, port: int, threads: int, slots: int, home: Path) -> list[str]:
    cfg = home / f"old-{port}.json"
    cfg.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": [{
        "model": str(model), "model_alias": ALIAS, "n_ctx": 2048, "n_threads": threads,
        "n_threads_batch": threads, "logits_all": False, "verbose": False}]}))
    return [sys.executable, "-m", "llama_cpp.server", "--config_file", str(cfg)]


def new_argv(model: Path, port: int, threads: int, slots: int, home: Path,
             threads_batch: int | None = None, program: list[str] | None = None) -> list[str]:
    """The server orch runs (the prebuilt one unless ``program`` names another)."""
    from orchestrator.local import llama_server as llama

    return llama.argv(program or llama.PREBUILT, model=model, alias=ALIAS, port=port, host="127.0.0.1",
                      slots=slots, n_ctx=2048, threads=threads, chat_format=None,
                      template_file=home / "unused.jinja", path=llama.FAST,
                      threads_batch=threads_batch)


def complete(port: int, tokens: int, timeout: float = 600) -> int:
    return complete_timed(port, tokens, timeout)[0]


def complete_timed(port: int, tokens: int, timeout: float = 600) -> tuple[int, dict | None]:
    """Tokens generated, and llama-server's own timings of the request (None elsewhere)."""
    body = json.dumps({"model": ALIAS, "prompt": PROMPT, "max_tokens": tokens,
                       "temperature": 0.8, "logit_bias": BANNED}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        doc = json.load(resp)
    return doc["usage"]["completion_tokens"], doc.get("timings")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def evict(*paths: Path) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def start(argv: list[str], port: int) -> tuple[subprocess.Popen, float]:
    """Start a server; seconds until its first 1-token completion answers."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            complete(port, 1, timeout=5)
            return proc, time.perf_counter() - t0
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: {argv}") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def concurrently(ports: list[int], tokens: int, steps: list | None = None) -> tuple[int, float]:
    """Send one request to each port at once; tokens in total and wall seconds. ``steps``
    collects llama-server's milliseconds per generated token of each request."""
    done: list[tuple[int, dict | None]] = []
    threads = [threading.Thread(target=lambda p=p: done.append(complete_timed(p, tokens)))
               for p in ports]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if steps is not None:
        steps += [t["predicted_per_token_ms"] for _, t in done if t]
    return sum(n for n, _ in done), wall


def memory(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM")).split()[1])
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    pss = int(next(ln for ln in rollup.splitlines() if ln.startswith("Pss:")).split()[1])
    return {"peak_rss_mb": round(hwm / 1024, 1), "pss_mb": round(pss / 1024, 1)}


def bench_server(kind: str, make_argv, model: Path, binary: Path, threads: int, tokens: int,
                 reps: int, home: Path) -> dict:
    out: dict = {}
    cold, warm = [], []
    for _ in range(reps):
        evict(model, binary)
        port = free_port()
        proc, seconds = start(make_argv(model, port, threads, 4, home), port)
        cold.append(seconds)
        stop(proc)
        port = free_port()
        proc, seconds = start(make_argv(model, port, threads, 4, home), port)
        warm.append(seconds)
        stop(proc)
    out["start_cold_s"] = round(statistics.median(cold), 2)
    out["start_warm_s"] = round(statistics.median(warm), 2)
    port = free_port()
    proc, _ = start(make_argv(model, port, threads, 4, home), port)
    try:
        complete(port, 8)
        one, two, four, seq = [], [], [], []
        step1: list[float] = []
        step4: list[float] = []
        cpu = {1: [0.0, 0], 2: [0.0, 0], 4: [0.0, 0]}  # CPU seconds, tokens

        def timed(k: int, steps: list | None = None) -> tuple[int, float]:
            c0 = cpu_seconds(proc.pid)
            n, wall = concurrently([port] * k, tokens, steps)
            cpu[k][0] += cpu_seconds(proc.pid) - c0
            cpu[k][1] += n
            return n, wall

        for _ in range(reps):
            n, wall = timed(1, step1)
            one.append(n / wall)
            n, wall = timed(2)
            two.append(n / wall)
            n, wall = timed(4, step4)
            four.append((n / wall, wall))
            t0 = time.perf_counter()
            for _ in range(4):
                complete(port, tokens)
            seq.append(time.perf_counter() - t0)
        out["tok_s_1"] = round(statistics.median(one), 1)
        out["tok_s_2_total"] = round(statistics.median(two), 1)  # README command 1: 2 legs
        out["tok_s_4_total"] = round(statistics.median(r for r, _ in four), 1)
        out["ratio_4_vs_1"] = round(out["tok_s_4_total"] / out["tok_s_1"], 2)
        out["wall_4_concurrent_s"] = round(statistics.median(w for _, w in four), 2)
        out["wall_4_sequential_s"] = round(statistics.median(seq), 2)
        out["wall_ratio"] = round(out["wall_4_concurrent_s"] / out["wall_4_sequential_s"], 2)
        out["cpu_ms_per_token_1"] = round(1000 * cpu[1][0] / cpu[1][1], 2)
        out["cpu_ms_per_token_2"] = round(1000 * cpu[2][0] / cpu[2][1], 2)
        out["cpu_ms_per_token_4"] = round(1000 * cpu[4][0] / cpu[4][1], 2)
        if step1 and step4:
            out.update(step_cost(statistics.median(step1), statistics.median(step4)))
        out["memory_one_server"] = memory(proc.pid)
    finally:
        stop(proc)
    ports = [free_port() for _ in range(4)]
    procs = []
    try:
        for p in ports:
            procs.append(start(make_argv(model, p, threads, 1, home), p)[0])
        concurrently(ports, tokens)
        each = [memory(p.pid) for p in procs]
    finally:
        for p in procs:
            stop(p)
    out["memory_four_servers"] = {
        "pss_mb_sum": round(sum(m["pss_mb"] for m in each), 1),
        "peak_rss_mb_sum": round(sum(m["peak_rss_mb"] for m in each), 1)}
    out["pss_saved_ratio"] = round(out["memory_four_servers"]["pss_mb_sum"]
                                   / out["memory_one_server"]["pss_mb"], 2)
    print(f"{kind}: {out}", flush=True)
    return out


def step_cost(ms1: float, ms4: float) -> dict:
    """A decode step with 4 busy slots against one with 1: ``step = fixed + per_token × n``.
    4 slots give at most ``4 × step(1) / step(4)`` the tokens/s of one slot."""
    per_token = (ms4 - ms1) / 3
    return {"step_ms_1": round(ms1, 2), "step_ms_4": round(ms4, 2),
            "step_4_vs_1": round(ms4 / ms1, 2),
            "step_fixed_ms": round(ms1 - per_token, 2), "step_per_token_ms": round(per_token, 2),
            "ceiling_4_vs_1": round(4 * ms1 / ms4, 2)}


def verdicts(new: dict, engine: dict | None) -> list[str]:
    """The issue's targets on 2 cores, each with its figure and whether it is met."""
    def line(what: str, value: float, target: str, met: bool) -> str:
        return f"  {what}: {value:.2f} (target {target}) -> {'MET' if met else 'NOT MET'}"

    out = [line("4 concurrent total tok/s / 1 request tok/s", new["ratio_4_vs_1"], ">= 2.0",
                new["ratio_4_vs_1"] >= 2.0),
           line("wall of 4 concurrent / wall of the same 4 one after another",
                new["wall_ratio"], "<= 0.6", new["wall_ratio"] <= 0.6)]
    if engine:
        out.append(line("4-leg wave through orch / 4 one-leg waves in a row", engine["ratio"],
                        "<= 0.6", engine["ratio"] <= 0.6))
    if "step_4_vs_1" in new:
        out.append(f"  why: a decode step with 4 busy slots costs {new['step_4_vs_1']:.2f}x one "
                   f"with 1 ({new['step_ms_4']} vs {new['step_ms_1']} ms: "
                   f"{new['step_fixed_ms']} ms fixed + {new['step_per_token_ms']} ms per slot), "
                   f"so 4 slots give at most {new['ceiling_4_vs_1']:.2f}x; server CPU per token "
                   f"{new['cpu_ms_per_token_1']} ms (1 busy slot), "
                   f"{new['cpu_ms_per_token_2']} ms (2), {new['cpu_ms_per_token_4']} ms (4)")
    return out


def bench_engine(tokens: int, threads: int, reps: int, threads_batch: int | None) -> dict:
    """A 4-leg wave through orch against 4 one-leg waves in a row, on the managed server."""
    import anyio

    from orchestrator import runtime
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.local import manager
    from orchestrator.local.settings import LocalSettings
    from orchestrator.models.resolve import resolve_all

    home = Path(tempfile.mkdtemp(prefix="orch-bench-local-"))
    os.environ["ORCH_HOME"] = str(home)
    os.environ["ORCH_PLUGINS"] = "local"
    (home / "config.json").write_text(json.dumps({"local": {
        "idle_minutes": 0, "max_tokens": tokens, "n_threads": threads, "max_slots": 4,
        **({"n_threads_batch": threads_batch} if threads_batch else {})}}))
    runtime.config.cache_clear()
    cfg = runtime.config()
    pm = runtime.plugin_manager()

    def wave(n: int) -> float:
        spec = WaveSpec(models=resolve_all([f"local/{ALIAS}"] * n, cfg, pm),
                        briefing=PROMPT, runs_dir=home / "runs", timeout_s=1200)
        t0 = time.perf_counter()
        doc = anyio.run(Wave(spec, pm=pm, config=cfg, ledger=LedgerSink()).run)
        assert doc["status"] == "complete", [leg["reason"] for leg in doc["legs"]]
        return time.perf_counter() - t0

    manager.ensure(LocalSettings.from_config(cfg), slots=4)
    wave(1)  # warm-up
    four, seq = [], []
    for _ in range(reps):
        four.append(wave(4))
        seq.append(sum(wave(1) for _ in range(4)))
    manager.stop()
    return {"wave_4_legs_s": round(statistics.median(four), 2),
            "four_1_leg_waves_s": round(statistics.median(seq), 2),
            "ratio": round(statistics.median(four) / statistics.median(seq), 2),
            "note": "orch-plain stops at the first blank line: answers vary in length"}


def bench_threads(counts: list[str], tokens: int, reps: int, home: Path) -> dict:
    """tok/s of 1 request and of 4 at once, per thread count, alternating round by round."""
    from orchestrator.local.settings import free_cores

    model = model_path()
    rounds = []
    for r in range(reps):
        for given in counts:
            threads = free_cores()[0] if given == "auto" else int(given)
            load = os.getloadavg()[0]
            port = free_port()
            proc, _ = start(new_argv(model, port, threads, 4, home), port)
            try:
                complete(port, 8)
                n1, w1 = concurrently([port], tokens)
                n4, w4 = concurrently([port] * 4, tokens)
                n1b, w1b = concurrently([port], tokens)
            finally:
                stop(proc)
            one = (n1 / w1 + n1b / w1b) / 2
            row = {"round": r, "setting": given, "threads": threads, "load_before": load,
                   "load_after": os.getloadavg()[0], "tok_s_1": round(one, 1),
                   "tok_s_4_total": round(n4 / w4, 1), "ratio_4_vs_1": round(n4 / w4 / one, 2)}
            rounds.append(row)
            print(row, flush=True)
    out = {}
    for given in counts:
        mine = [x for x in rounds if x["setting"] == given]
        one = statistics.median(x["tok_s_1"] for x in mine)
        four = statistics.median(x["tok_s_4_total"] for x in mine)
        out[given] = {"tok_s_1": round(one, 1), "tok_s_4_total": round(four, 1),
                      "ratio_4_vs_1": round(four / one, 2),
                      "load": [round(min(x["load_before"] for x in mine), 1),
                               round(max(x["load_after"] for x in mine), 1)]}
    return {"rounds": rounds, "median": out}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads (default: orch's, the cores free now)")
    parser.add_argument("--threads-batch", type=int, default=None,
                        help="llama-server threads for steps of several tokens (several slots "
                        "or a prompt); default: orch's, the same as --threads")
    parser.add_argument("--legacy", action="store_true",
                        help="compare with llama_cpp.server (the bench-legacy extra) when no "
                        "compiled llama-server is there")
    parser.add_argument("--server-flags", default="",
                        help="more llama-server flags for both servers, e.g. \"-fa off\" "
                        "(the prebuilt one takes the flags orch gives it only)")
    parser.add_argument("--baseline-binary", default=None,
                        help="compare with this llama-server binary (same flags) instead of "
                        "the one orch local build made")
    parser.add_argument("--skip-engine", action="store_true", help="no wave through orch")
    parser.add_argument("--compare-threads", default=None, metavar="N,M,auto",
                        help="only tok/s of 1 and 4 requests, per thread count side by side")
    args = parser.parse_args()
    offline()
    if args.compare_threads:
        counts = [c.strip() for c in args.compare_threads.split(",") if c.strip()]
        home = Path(tempfile.mkdtemp(prefix="orch-bench-threads-"))
        doc = bench_threads(counts, args.tokens, args.reps, home)
        write_result("local_threads", {"machine": machine(), "tokens_per_request": args.tokens,
                                       **doc})
        for given, m in doc["median"].items():
            print(f"  --threads {given}: 1 request {m['tok_s_1']} tok/s, 4 at once "
                  f"{m['tok_s_4_total']} tok/s ({m['ratio_4_vs_1']}x), load {m['load'][0]}"
                  f"-{m['load'][1]}")
        return
    import xllamacpp

    from orchestrator.local import build
    from orchestrator.local.settings import default_threads
    from orchestrator.runtime import litellm

    litellm()
    threads = args.threads or default_threads()
    threads_batch = args.threads_batch or threads
    model = model_path()
    home = Path(tempfile.mkdtemp(prefix="orch-bench-servers-"))
    load_before = os.getloadavg()
    extension = next(Path(xllamacpp.__file__).parent.glob("xllamacpp*.so"))

    def prebuilt_argv(model: Path, port: int, threads: int, slots: int, home: Path) -> list:
        return new_argv(model, port, threads, slots, home, threads_batch)

    new = bench_server(f"prebuilt (xllamacpp {xllamacpp.__version__})", prebuilt_argv, model,
                       extension, threads, args.tokens, args.reps, home)
    old = None
    binary = (Path(args.baseline_binary).resolve() if args.baseline_binary
              else build.binary() if build.built() else None)
    if binary is not None:  # a compiled llama-server, same flags
        def compiled_argv(model: Path, port: int, threads: int, slots: int, home: Path) -> list:
            return [*new_argv(model, port, threads, slots, home, threads_batch, [str(binary)]),
                    *shlex.split(args.server_flags)]

        old = bench_server(f"compiled llama-server ({binary})", compiled_argv, model, binary,
                           threads, args.tokens, args.reps, home)
    elif args.legacy:
        import llama_cpp

        lib = next(Path(llama_cpp.__file__).parent.glob("lib/libllama*"))
        old = bench_server("old (llama_cpp.server)", old_argv, model, lib, threads,
                           args.tokens, args.reps, home)
    else:
        print("no compiled llama-server to compare with (orch local build makes one)")
    engine = None
    if not args.skip_engine:
        engine = bench_engine(args.tokens, threads, args.reps, args.threads_batch)
        print(f"engine: {engine}")
    load_after = os.getloadavg()
    write_result("local", {
        "machine": machine(), "load_average_before": load_before,
        "load_average_after": load_after, "tokens_per_request": args.tokens,
        "n_threads": threads, "n_threads_batch": threads_batch, "new": new, "old": old,
        "engine": engine, "prebuilt": f"xllamacpp {xllamacpp.__version__}",
        "build": build.built()})
    print(f"\nprebuilt server, --threads {threads} --threads-batch {threads_batch}, "
          f"{args.tokens} tokens per request, load average {load_before[0]:.1f} -> "
          f"{load_after[0]:.1f} on {os.cpu_count()} cores:")
    for name, doc in (("prebuilt", new), ("compared", old)):
        if doc:
            print(f"  {name}: 1 request {doc['tok_s_1']} tok/s; 2 concurrent "
                  f"{doc['tok_s_2_total']} tok/s; 4 concurrent {doc['tok_s_4_total']} tok/s in "
                  f"total; start cold {doc['start_cold_s']} s, warm {doc['start_warm_s']} s; "
                  f"PSS {doc['memory_one_server']['pss_mb']} MB")
    print("targets (issue 15, 2 cores):")
    print("\n".join(verdicts(new, engine)))


if __name__ == "__main__":
    main()
