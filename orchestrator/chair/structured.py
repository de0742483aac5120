"""``--synthesis structured``: the chair's reply ends with one fenced JSON block holding the
points of consensus, the disagreements (each side with the answers that hold it), the points
only one answer raised and the chair's resolution. Answers are named by their anonymous
labels. The block is read as council findings are (council/findings.py): strictly, then with
json-repair; an unusable block gets one repair prompt; still unusable, the chair's prose stands
and the document says why.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

from orchestrator.council.continuable import closed

FORMAT = """```json
{"consensus": ["a point every answer makes"],
 "disagreements": [{"point": "what they disagree on",
                    "sides": [{"position": "one side", "answers": ["A", "C"]},
                              {"position": "the other side", "answers": ["B"]}]}],
 "unique": [{"point": "a point only one answer raised", "answer": "B"}],
 "resolution": "your conclusion, and which side the evidence favours"}
```"""

ENDING = f"""Write your synthesis, then end your reply with exactly one fenced JSON block in \
this format (answers named by their labels; an empty list where there is nothing to say):

{FORMAT}"""

REPAIR = """Earlier, as chair, you wrote the synthesis quoted between <<<SYNTHESIS and \
SYNTHESIS>>> below. Its JSON block could not be read: {problem}. Reply with only that block, \
in this format (answers: {labels}):

{format}

<<<SYNTHESIS
{synthesis}
SYNTHESIS>>>"""

KEYS = ("consensus", "disagreements", "unique", "resolution")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)
_LABEL = re.compile(r"^(?:answer\s+)?([A-Z]|\d+)$", re.I)


def repair_prompt(synthesis: str, problem: str, labels: list[str]) -> str:
    # str.replace, not format: FORMAT's braces are literal JSON
    return (REPAIR.replace("{problem}", problem).replace("{labels}", ", ".join(labels))
            .replace("{format}", FORMAT).replace("{synthesis}", closed(synthesis.strip())))


def _block(text: str) -> tuple[str, str] | None:
    """The last fenced block that is JSON (by its tag or its first character), else the text
    from its last ``{``; and the prose without it."""
    found = None
    for m in _FENCE.finditer(text):
        tag, body = m.group(1).lower(), m.group(2).strip()
        if tag == "json" or (not tag and body[:1] == "{"):
            found = m
    if found is not None:
        return found.group(2).strip(), (text[:found.start()] + text[found.end():]).strip()
    start = text.rfind("{")
    if start < 0:
        return None
    return text[start:], text[:start].strip()


def _line(value: Any) -> str:
    return " ".join(str(value if value is not None else "").split())[:2000]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        if isinstance(item, dict):  # {"point": ...} where a string was asked for
            item = item.get("point") or item.get("text") or ""
        if _line(item):
            out.append(_line(item))
    return out


class Reader:
    """Reads a structured synthesis against the labels the chair was shown."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = list(labels)
        self.unknown: set[str] = set()

    def label(self, value: Any) -> str | None:
        m = _LABEL.match(_line(value).strip("*_`.:!\"'"))
        name = f"Answer {m.group(1).upper()}" if m else None
        if name in self.labels:
            return name
        if _line(value):
            self.unknown.add(_line(value)[:40])
        return None

    def labels_of(self, value: Any) -> list[str]:
        values = value if isinstance(value, list) else [value] if value else []
        return list(dict.fromkeys(x for x in map(self.label, values) if x))

    def read(self, text: str, source: str | None = None) -> dict[str, Any]:
        """The synthesis: ``consensus``, ``disagreements``, ``unique``, ``resolution``,
        ``prose``; ``source`` (block, json-repair, re-prompt) or ``problem``."""
        text = text or ""
        out: dict[str, Any] = {"consensus": [], "disagreements": [], "unique": [],
                               "resolution": "", "prose": text.strip(), "source": None,
                               "problem": None, "unknown_labels": []}
        found = _block(text)
        if found is None:
            out["problem"] = "there is no JSON block"
            return out
        body, out["prose"] = found
        try:
            data, how = json.loads(body), "block"
        except ValueError:
            data, how = json_repair.loads(body), "json-repair"
        if not isinstance(data, dict) or not set(KEYS) & set(data):
            out["problem"] = ("the block is not a JSON object with consensus, disagreements, "
                              "unique and resolution")
            return out
        out["consensus"] = _strings(data.get("consensus"))
        for item in data.get("disagreements") or []:
            if not isinstance(item, dict):
                continue
            sides = [{"position": _line(s.get("position") or s.get("view")),
                      "answers": self.labels_of(s.get("answers") or s.get("answer"))}
                     for s in item.get("sides") or [] if isinstance(s, dict)]
            sides = [s for s in sides if s["position"] or s["answers"]]
            if _line(item.get("point")) or sides:
                out["disagreements"].append({"point": _line(item.get("point")),
                                             "sides": sides})
        for item in data.get("unique") or []:
            if isinstance(item, dict) and _line(item.get("point")):
                out["unique"].append({"point": _line(item.get("point")),
                                      "answer": self.label(item.get("answer"))})
        resolution = data.get("resolution")
        out["resolution"] = str(resolution).strip()[:8000] if resolution is not None else ""
        if not (out["consensus"] or out["disagreements"] or out["unique"]
                or out["resolution"]):
            out["problem"] = "the block holds no consensus, disagreement, unique point or " \
                             "resolution"
            return out
        out["source"] = source or how
        out["unknown_labels"] = sorted(self.unknown)
        return out
