"""Lines of the tutorial plugin (a refusal guard, a tool, a subcommand, with tests), written
against docs/plugins.md before issue 17 (``bench/tutorial/before``) and after it
(``bench/tutorial/after``): all lines and non-blank lines, module and tests.

Run by hand: ``python bench/bench_tutorial_lines.py``. Both versions pass their tests:
``cd bench/tutorial/after && PYTHONPATH=. pytest -q -p no:cacheprovider .``
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parent / "tutorial"


def count(folder: Path) -> tuple[int, int]:
    lines = [line for p in sorted(folder.glob("*.py")) for line in p.read_text().splitlines()]
    return len(lines), sum(1 for line in lines if line.strip())


def main() -> None:
    before, after = count(ROOT / "before"), count(ROOT / "after")
    print(f"{'version':<8} {'lines':>6} {'non-blank':>10}")
    for name, (total, code) in (("before", before), ("after", after)):
        print(f"{name:<8} {total:>6} {code:>10}")
    print(f"after/before: {after[0] / before[0]:.2f} (lines), {after[1] / before[1]:.2f} "
          "(non-blank)")


if __name__ == "__main__":
    main()
