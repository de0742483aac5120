"""The hidden check of the ``review`` suite: does the answer name the seeded bug's file and
a line within ±3 of it? ``_bugs.json`` holds each task's (file, line, kind); ``check_NN`` is
task NN's check (the task files name it). Only the first three locations an answer names
count, so listing every line of every file does not pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

TOLERANCE = 3  # lines either side of the bug
COUNTED = 3  # locations of an answer that count
LOCATION = re.compile(r"(?P<file>[\w./-]+\.[A-Za-z]{1,5})(?::|#L|,?\s+(?:at\s+)?line\s+)"
                      r"(?P<line>\d+)")
BUGS = json.loads((Path(__file__).parent / "_bugs.json").read_text(encoding="utf-8"))


def locations(answer: str) -> list[tuple[str, int]]:
    """(file, line) pairs the answer names, in order."""
    return [(m["file"].removeprefix("./").removeprefix("b/").removeprefix("a/"),
             int(m["line"])) for m in LOCATION.finditer(answer or "")]


def hits(answer: str, path: str, line: int) -> bool:
    for file, said in locations(answer)[:COUNTED]:
        same = file == path or path.endswith("/" + file)
        if same and abs(said - line) <= TOLERANCE:
            return True
    return False


def _check(task_id: str):
    path, line, _kind = BUGS[task_id]

    def check(answer: str) -> bool:
        return hits(answer, path, line)
    return check


for _n, _id in enumerate(BUGS, start=1):
    globals()[f"check_{_n:02d}"] = _check(_id)
