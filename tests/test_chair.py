"""One chair (orchestrator/chair): every mode builds its packet through one layout and marks a
cut or unfinished answer with one set of marks; a structured synthesis is read strictly, then
with json-repair, against the labels the chair was shown. Pure: no server."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from orchestrator.chair.marks import CUT, marks_of, unfinished
from orchestrator.chair.structured import Reader
from orchestrator.chair.synthesis import FanoutChair, deliberation_packet
from orchestrator.engine.record import COMPLETE, LegRecord

ROOT = Path(__file__).resolve().parents[1]


def record(n: int, answer: str, **extra) -> LegRecord:
    rec = LegRecord(leg_id=f"w-{n}", wave_id="w", model=f"scripted/m{n}", provider="scripted")
    rec.status, rec.answer = COMPLETE, answer
    rec.finish_reason = extra.pop("finish_reason", "stop")
    rec.extra.update(extra)
    return rec


RECORDS = [record(1, "A cut answ", finish_reason="length"),
           record(2, "Partial: read two files.", finished=False, stopped="budget"),
           record(3, "A whole answer.")]


def heads(packet: str) -> list[str]:
    return [line for line in packet.splitlines() if line.startswith("### ")]


def test_marks():
    assert marks_of(RECORDS[0]) == [CUT]
    assert marks_of(record(9, "x", truncated=True)) == [CUT]  # the context guard's mark
    assert marks_of(RECORDS[1]) == [unfinished("budget")]
    assert marks_of(RECORDS[2]) == []
    assert marks_of(RECORDS[0].to_dict()) == [CUT]  # a leg's document reads the same


@pytest.mark.parametrize("build", [
    lambda: FanoutChair("plain").packet("Why?", RECORDS),
    lambda: FanoutChair("structured", seed="w").packet("Why?", RECORDS),
    lambda: deliberation_packet("Why?", 2, [
        {"models": [r.model], "text": r.answer, "marks": marks_of(r), "votes": 0,
         "winner": False} for r in RECORDS]),
], ids=["fanout", "structured", "deliberation"])
def test_every_mode_marks_cut_and_unfinished_answers_alike(build):
    packet = build()
    marked = heads(packet)
    assert len(marked) == 3
    assert sum(CUT in h for h in marked) == 1 and sum(unfinished("budget") in h
                                                      for h in marked) == 1
    assert "An answer marked CUT or UNFINISHED is incomplete" in packet
    nonce = re.search(r"<<<seat-text (\w+)", packet).group(1)
    assert all(h.endswith(f"[{nonce}]") for h in marked)  # orch's own headings carry it
    assert packet.rstrip().endswith(f"## Your synthesis [{nonce}]")


def test_the_structured_packet_labels_every_answer_by_a_seeded_deal():
    """(Names inside answers are redacted as the deliberation's are: tests/test_synthesis.py
    shows it on the wire.)"""
    chair = FanoutChair("structured", seed="w1")
    packet = chair.packet("Q?", [record(1, "x"), record(2, "y")])
    assert "scripted/m" not in packet and "### Answer A (" not in packet
    assert sorted(chair.labels) == ["Answer A", "Answer B"]
    assert {r.leg_id for r in chair.labels.values()} == {"w-1", "w-2"}
    # the labels are dealt by the seed, not by the order of --models
    assert len({tuple(r.leg_id for r in _dealt(f"w{i}")) for i in range(12)}) > 1


def _dealt(seed: str) -> list[LegRecord]:
    chair = FanoutChair("structured", seed=seed)
    chair.packet("Q?", [record(1, "x"), record(2, "y"), record(3, "z")])
    return list(chair.labels.values())


LABELS = ["Answer A", "Answer B", "Answer C"]
GOOD = """Prose first.
```json
{"consensus": ["use a dict"], "disagreements": [{"point": "eviction", "sides": [
 {"position": "LRU", "answers": ["A", "answer c"]}, {"position": "FIFO", "answers": ["B", "Z"]}]}],
 "unique": [{"point": "thread safety", "answer": "Answer B"}], "resolution": "LRU."}
```"""


@pytest.mark.parametrize("text,source,problem", [
    (GOOD, "block", None),
    # broken JSON: a trailing comma, single quotes, no closing fence or brace
    ("Prose.\n```json\n{'consensus': ['a', 'b',], 'resolution': 'go with A'",
     "json-repair", None),
    ('{"resolution": "only a resolution, no fence"}', "block", None),
    ("No block at all.", None, "there is no JSON block"),
    ("```json\n[1, 2]\n```", None, "not a JSON object"),
    ('```json\n{"consensus": [], "disagreements": [], "unique": [], "resolution": ""}\n```',
     None, "holds no consensus"),
])
def test_reading_a_structured_synthesis(text, source, problem):
    got = Reader(LABELS).read(text)
    assert got["source"] == source
    assert (got["problem"] is None) if problem is None else (problem in got["problem"])


def test_labels_are_read_loosely_and_unknown_ones_said():
    got = Reader(LABELS).read(GOOD)
    assert got["consensus"] == ["use a dict"] and got["resolution"] == "LRU."
    sides = got["disagreements"][0]["sides"]
    assert [s["answers"] for s in sides] == [["Answer A", "Answer C"], ["Answer B"]]
    assert got["unique"] == [{"point": "thread safety", "answer": "Answer B"}]
    assert got["unknown_labels"] == ["Z"] and got["prose"] == "Prose first."


# -- one home: the chair's words live in orchestrator/chair -------------------------------

def chair_words_outside(root: Path) -> list[str]:
    """Modules outside orchestrator/chair/ that write a chair's role or a cut/unfinished mark
    themselves (a string literal): each must come from chair/modes.py or chair/marks.py."""
    found = []
    for top in ("orchestrator", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("orchestrator/chair/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(
                        r"You are the chair|^(CUT|UNFINISHED): ", node.value):
                    found.append(f"{rel}:{node.lineno}")
    return found


def test_no_module_but_the_chair_writes_a_chair_prompt_or_a_mark():
    assert chair_words_outside(ROOT) == []


def test_a_chair_prompt_written_elsewhere_is_caught(tmp_path):
    planted = tmp_path / "orchestrator" / "deliberation" / "run.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('BRIEF = "You are the chair. Read these."\n'
                       'MARK = "CUT: this one stopped early"\n'
                       'NOTICE = f"seat {1}\'s review is CUT: a notice, not a mark"\n')
    (tmp_path / "orchestrator" / "chair").mkdir()
    (tmp_path / "orchestrator" / "chair" / "modes.py").write_text('R = "You are the chair."\n')
    assert chair_words_outside(tmp_path) == ["orchestrator/deliberation/run.py:1",
                                             "orchestrator/deliberation/run.py:2"]
