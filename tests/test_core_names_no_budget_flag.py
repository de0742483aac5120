"""The guard plugins declare their own flags (``register_options``): the core names none of
them (issue 32 item 2). ``--max-cost`` too: the cost_ceiling plugin declares it as a run
ceiling (``Option.run_ceiling``), which the council, deliberation, bench, retry and the MCP
tools find in the declarations, never by name."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOVED = ("--output-budget", "--thinking", "--leg-tokens", "--leg-seconds", "--max-cost")


def test_no_moved_budget_flag_is_named_in_the_core():
    pattern = re.compile("|".join(re.escape(flag) + r"\b" for flag in MOVED))
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "orchestrator").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert found == []


def test_the_plugins_declare_them():
    text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "plugins").glob("*.py"))
    for flag in MOVED:
        assert f'Option("{flag[2:]}"' in text
