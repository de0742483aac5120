"""Which heavy packages an ``orch`` command imports, in a fresh interpreter: ``orch --help``,
``orch ledger --help`` and the daemon's client must stay light (litellm alone takes seconds)."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
packages = set(json.loads(sys.argv[1]))
sys.argv = ["orch", *sys.argv[2:]]
from orchestrator.cli import main
try:
    main()
except SystemExit:
    pass
print("IMPORTED " + json.dumps(sorted(m for m in sys.modules
                                      if m.split(".")[0] in packages)), file=sys.stderr)
"""


def imported_by(args: list[str], packages: tuple[str, ...],
                timeout: float = 60) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``orch *args`` through the real entry point; (the process, the modules of
    ``packages`` it had loaded when the command ended)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(packages), *args],
                          capture_output=True, text=True, timeout=timeout)
    last = (proc.stderr.splitlines() or [""])[-1]
    if not last.startswith("IMPORTED "):
        raise AssertionError(f"the probe did not finish: {proc.stderr[-800:]}")
    return proc, json.loads(last.removeprefix("IMPORTED "))
