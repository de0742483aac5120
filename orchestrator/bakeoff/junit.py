"""A bench's trials as JUnit XML, the file CI systems read: one ``testsuite`` per
contestant, one ``testcase`` per trial (``task[trial]``), a failed trial a ``failure`` with
the check's output, an excluded one ``skipped`` with its reason. The elements and
attributes are those pytest's ``--junit-xml`` writes (xunit2), so whatever reads pytest's
reads this."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

MESSAGE_KEEP = 200  # characters of the first line kept as a failure's message


def document(doc: dict[str, Any]) -> ET.Element:
    root = ET.Element("testsuites", name="orch bench")
    names = [c["name"] for c in doc["settings"]["contestants"]]
    for name in names:
        rows = [r for r in doc["trials"] if r["contestant"] == name]
        failures = sum(1 for r in rows if not r.get("excluded") and not r.get("passed"))
        skipped = sum(1 for r in rows if r.get("excluded"))
        suite = ET.SubElement(root, "testsuite", name=name, errors="0",
                              failures=str(failures), skipped=str(skipped),
                              tests=str(len(rows)),
                              time=f"{sum(float(r.get('secs') or 0) for r in rows):.3f}",
                              timestamp=str(doc.get("started") or ""),
                              hostname=socket.gethostname())
        for r in rows:
            case = ET.SubElement(suite, "testcase", classname=f"{doc['bench_id']}.{name}",
                                 name=f"{r['task']}[{r['trial']}]",
                                 time=f"{float(r.get('secs') or 0):.3f}")
            if r.get("excluded"):
                ET.SubElement(case, "skipped", type="excluded",
                              message=_first_line(r["excluded"]))
            elif not r.get("passed"):
                text = r.get("check_output") or r.get("reason") or "the check failed"
                failure = ET.SubElement(case, "failure",
                                        message=_first_line(r.get("reason") or text))
                failure.text = text
    return root


def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return (lines[0] if lines else "")[:MESSAGE_KEEP]


def write(doc: dict[str, Any], path: Path) -> Path:
    """The XML, through the scrubbing writer (a check's output may quote model text)."""
    from orchestrator.store import write_text_atomic

    tree = ET.ElementTree(document(doc))
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n'
                      + ET.tostring(tree.getroot(), encoding="unicode") + "\n")
    return path
