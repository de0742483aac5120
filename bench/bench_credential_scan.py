"""What the credential-content scan finds, what it wrongly withholds, and what it costs.

Accuracy (``--accuracy``; issue 38)::

    .venv/bin/python bench/bench_credential_scan.py --accuracy --corpus /tmp/orch-corpus

- *recall*: the share of labelled secrets the scan withholds (and, where the secret is known,
  the secret is gone from the text), over gitleaks' and detect-secrets' own test fixtures
  (how to get them: ``bench/credential_corpus.py``; read from outside the repo, never
  committed) and orch's ``bench/credential_samples.json``; their negatives, withheld, are
  counted too (many are secret-shaped: a gitleaks "fp" is often a key in a file gitleaks
  allows);
- *false positives*: every text file of the installed packages (``--ordinary``, default this
  venv's ``site-packages``), scanned whole as a ``--context`` file is: withheld spans per
  1,000 files and files with one or more, by rule. Ordinary code holds no credential, so
  every span counts, except ``private-key`` blocks that are keys (a package's test keys),
  counted apart.

Before/after on one machine: the same command with ``PYTHONPATH`` pointing at an older
``orchestrator/`` (``git archive 3be1388 orchestrator | tar -x -C /tmp/before``), so both
runs read the same corpus. Writes bench/results/credential_accuracy.json.

Cost (the default): a 64-leg wave whose tools return 12 KB of code, scanned before each
result is sent, against the same wave with the scan made a no-op.

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
import re
import statistics
import sysconfig
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


def _text_files(root: Path, max_bytes: int = 1_000_000):
    """Every text file under ``root`` (as the workspace tools see one: no NUL in its first
    8 KB, at most 1 MB), decoded as ``--context`` decodes it."""
    for path in sorted(root.rglob("*")):
        try:
            if not path.is_file() or path.is_symlink() or path.stat().st_size > max_bytes:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192] or path.suffix in (".pyc", ".so", ".whl"):
            continue
        yield path, data.decode("utf-8", errors="replace")


# Fixtures that count a placeholder as a secret (detect-secrets' ``AKIAZZZZ...``,
# ``abcd1234abcd1234...``, gitleaks' ``12345678-ABCD-...``, ``cafebabe:deadbeef``) and
# detect-secrets' public IPs (an address, not a credential): reported apart, so the recall on
# credentials is not read off how many placeholders a scan also withholds.
PLACEHOLDER_FIXTURE = re.compile(
    r"(?i)xxxx|zzzz|(?:abcd1234){2}|1234567890abcdef|12345678-abcd|abcdefghij|example|"
    r"username:password|deadbeef|12345678abcdefh|(.)\1{7,}")


def _placeholder_fixture(sample) -> bool:
    return sample.source == "detect-secrets:ip_public" or bool(
        PLACEHOLDER_FIXTURE.search(sample.secret or sample.text))


def recall(samples) -> dict:
    from orchestrator.security.credential_content import withhold

    by_source: dict[str, dict[str, int]] = {}
    missed, flagged = [], []
    for s in samples:
        out = withhold(s.text)
        caught = bool(out.rules) and (s.secret is None or s.secret not in out.text)
        family = s.source.split(":")[0]
        row = by_source.setdefault(family, {"positives": 0, "found": 0, "negatives": 0,
                                            "withheld": 0, "placeholders": 0,
                                            "placeholders_found": 0})
        if s.positive:
            row["positives"] += 1
            row["found"] += caught
            if _placeholder_fixture(s):
                row["placeholders"] += 1
                row["placeholders_found"] += caught
            if not caught:
                missed.append(s)
        else:
            row["negatives"] += 1
            row["withheld"] += bool(out.rules)
            if out.rules:
                flagged.append((s, out.rules))
    return {"by_source": by_source, "missed": missed, "flagged": flagged}


def ordinary(root: Path) -> dict:
    from orchestrator.security.credential_content import find

    files = spans = flagged_files = keys = 0
    by_rule: dict[str, int] = {}
    examples: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    for path, text in _text_files(root):
        files += 1
        found = find(text)
        real = [m for m in found if not (m.rule == "private-key" and _is_key(text, m))]
        keys += len(found) - len(real)
        if real:
            flagged_files += 1
        for m in real:
            spans += 1
            by_rule[m.rule] = by_rule.get(m.rule, 0) + 1
            line_start = text.rfind("\n", 0, m.start) + 1
            line_end = text.find("\n", m.end)
            line = text[line_start:line_end if line_end != -1 else len(text)]
            examples.append((m.rule, str(path.relative_to(root)), line[:200]))
    return {"files": files, "spans": spans, "files_flagged": flagged_files,
            "per_1000_files": spans / files * 1000 if files else 0.0,
            "files_flagged_per_1000": flagged_files / files * 1000 if files else 0.0,
            "key_blocks": keys, "by_rule": dict(sorted(by_rule.items())),
            "seconds": time.perf_counter() - t0, "examples": examples}


def _is_key(text: str, m) -> bool:
    """A withheld private-key block that is a key: its END marker and a body of base64."""
    block = text[m.start:m.end]
    return "-----END" in block and sum(c.isalnum() for c in block) > 200


def accuracy(corpus: Path | None, root: Path, show: int) -> None:
    import credential_corpus

    samples, skipped = credential_corpus.load(corpus)
    got = recall(samples)
    print("recall (positives withheld, secret gone), all | without placeholder fixtures; "
          "negatives withheld:")
    total_p = total_f = real_p = real_f = 0
    for family, row in sorted(got["by_source"].items()):
        total_p += row["positives"]
        total_f += row["found"]
        rp = row["positives"] - row["placeholders"]
        rf = row["found"] - row["placeholders_found"]
        real_p, real_f = real_p + rp, real_f + rf
        print(f"  {family:15} {row['found']:4}/{row['positives']:<4} "
              f"{row['found'] / max(row['positives'], 1):6.1%} | {rf:4}/{rp:<4} "
              f"{rf / max(rp, 1):6.1%}   negatives withheld {row['withheld']}/{row['negatives']}"
              + (f"   (skipped: {skipped[family]})" if family in skipped else ""))
    print(f"  {'all':15} {total_f:4}/{total_p:<4} {total_f / max(total_p, 1):6.1%} | "
          f"{real_f:4}/{real_p:<4} {real_f / max(real_p, 1):6.1%}")
    for s in got["missed"][:show]:
        print(f"  missed {s.source}: {s.text[:160]!r}")
    for s, rules in got["flagged"][:show]:
        print(f"  negative withheld {s.source} {rules}: {s.text[:160]!r}")
    fp = ordinary(root)
    print(f"ordinary code: {fp['files']:,} files under {root}: {fp['spans']:,} spans withheld "
          f"({fp['per_1000_files']:.1f} per 1,000 files) in {fp['files_flagged']:,} files "
          f"({fp['files_flagged_per_1000']:.1f} per 1,000); private keys (test keys): "
          f"{fp['key_blocks']}; {fp['seconds']:.1f} s")
    for rule, n in fp["by_rule"].items():
        print(f"  {rule}: {n}")
    for rule, path, line in fp["examples"][:show]:
        print(f"  {rule} {path}: {line!r}")
    write_result("credential_accuracy", {
        "machine": machine(), "corpus": str(corpus), "ordinary": str(root),
        "samples": len(samples), "skipped": skipped, "by_source": got["by_source"],
        "recall": total_f / max(total_p, 1), "recall_without_placeholders":
        real_f / max(real_p, 1),
        "missed": [[s.source, s.text[:200]] for s in got["missed"]],
        **{k: v for k, v in fp.items() if k != "examples"},
        "examples": fp["examples"][:500]})


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
    parser.add_argument("--accuracy", action="store_true",
                        help="measure recall and false positives instead of the cost")
    parser.add_argument("--corpus", type=Path, help="a folder holding gitleaks/ and "
                        "detect-secrets/ checkouts (bench/credential_corpus.py says how)")
    parser.add_argument("--ordinary", type=Path, default=Path(sysconfig.get_paths()["purelib"]),
                        help="a tree of ordinary code (default: this venv's site-packages)")
    parser.add_argument("--show", type=int, default=0, help="print this many misses and "
                        "false positives")
    args = parser.parse_args()
    offline()
    if args.accuracy:
        accuracy(args.corpus, args.ordinary, args.show)
        return
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
