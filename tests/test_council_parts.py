"""The council's pure parts: reading findings blocks, judgements and verdicts; the anonymised
bundle's labels, per-judge shuffles and redaction."""

from __future__ import annotations

import json

import pytest

from orchestrator.council.bundle import build_bundle, identifying_terms, leaks, redact
from orchestrator.council.chair import parse_verdict
from orchestrator.council.findings import Review, extract
from orchestrator.council.judging import parse_judgement
from orchestrator.models.addressing import ResolvedModel

ONE = {"id": "1", "severity": "major", "claim": "off by one", "location": "a.py:3",
       "rationale": "loop bound"}


def fenced(body: str, tag: str = "json") -> str:
    return f"Prose first.\n\n```{tag}\n{body}\n```\n"


def test_a_strict_block_is_read_and_removed_from_the_prose():
    got = extract(fenced(json.dumps([ONE])))
    assert got.source == "block" and got.prose == "Prose first."
    assert got.findings == [{"local_id": "1", "severity": "major", "claim": "off by one",
                             "location": "a.py:3", "rationale": "loop bound"}]


@pytest.mark.parametrize("text, source, n", [
    (fenced("[{'severity': 'MAJOR', 'claim': 'x y',}]"), "json-repair", 1),
    (fenced('{"findings": [{"severity": "nit", "claim": "z"}]}'), "block", 1),
    (fenced("[]"), "block", 0),  # a review with nothing to raise conforms
    (fenced(json.dumps([ONE]), tag=""), "block", 1),
    ("Prose.\n```json\n[" + json.dumps(ONE), "json-repair", 1),  # cut before the fence closed
])
def test_blocks_that_can_be_read(text, source, n):
    got = extract(text)
    assert got.findings is not None and len(got.findings) == n and got.source == source


@pytest.mark.parametrize("text, problem", [
    ("Just prose, no block at all.", "no fenced JSON findings block"),
    (fenced("}}} not json {{"), "not valid JSON and json-repair found no findings"),
    (fenced('"a string"'), "not a JSON list"),
    (fenced('[{"severity": "major", "rationale": "x"}]'), "no finding in the block"),
])
def test_blocks_that_cannot_be_read_name_the_problem(text, problem):
    got = extract(text)
    assert got.findings is None and problem in got.problem


def test_items_without_a_claim_are_dropped_and_counted():
    got = extract(fenced(json.dumps([ONE, {"severity": "major"}, {"claim": "c"}, "text"])))
    assert len(got.findings) == 2 and got.dropped == 2
    assert got.findings[1]["severity"] == "minor" and "'none'" in got.findings[1][
        "severity_note"]


@pytest.mark.parametrize("written, severity", [
    ("critical", "blocker"), ("CRITICAL", "blocker"), ("blocker", "blocker"),
    ("high", "major"), ("High", "major"), ("major", "major"),
    ("medium", "minor"), ("minor", "minor"),
    ("low", "nit"), ("info", "nit"), ("nit", "nit"),
])
def test_severity_synonyms_are_mapped_never_dropped(written, severity):
    got = extract(fenced(json.dumps([{**ONE, "severity": written}])))
    assert got.dropped == 0 and got.findings[0]["severity"] == severity
    assert "severity_note" not in got.findings[0]


def test_an_unknown_severity_is_kept_as_minor_with_a_note():
    got = extract(fenced(json.dumps([{**ONE, "severity": "catastrophic"}])))
    assert got.dropped == 0 and got.findings[0]["severity"] == "minor"
    assert got.findings[0]["severity_note"] == (
        "severity 'catastrophic' is not one the council knows; kept as minor")


def test_a_review_keeps_its_prose_when_the_repair_fails_too():
    review = Review("x/m")
    review.read("My prose.\n```json\nnope\n```", "length")
    assert review.cut and not review.conformed and review.prose == "My prose."
    assert review.take_repair("still nothing") is False and review.prose == "My prose."
    assert review.take_repair(fenced(json.dumps([ONE]))) and review.source == "re-prompt"


def test_judgements_keep_only_what_the_judge_was_shown():
    text = fenced(json.dumps({"votes": [
        {"id": "F1", "vote": "Agree", "reason": "right\nsecond line"},
        {"finding": "f2", "vote": "disagree", "reason": "no"},
        {"id": "F3", "vote": "agree"},          # its own finding: not shown, dropped
        {"id": "F1", "vote": "dispute"},        # a second vote on F1: dropped
        {"id": "F4", "vote": "perhaps"}],       # not a vote
        "ranking": ["B", "Review C", "Review A", "nonsense"]}))
    j = parse_judgement("x/j", text, ["F1", "F2", "F4", "F5"], ["Review B", "Review C"])
    assert j.usable and j.source == "block"
    assert [(v["finding"], v["vote"], v["reason"]) for v in j.votes] == [
        ("F1", "agree", "right"), ("F2", "dispute", "no")]
    assert j.ranking == ["Review B", "Review C"]
    assert j.missing == ["F4", "F5"] and j.ignored == 5


def test_a_broken_judgement_block_is_repaired_and_garbage_is_unusable():
    repaired = parse_judgement("x/j", "```json\n{'votes': [{'id': 'F1', 'vote': 'agree'}\n",
                               ["F1"], [])
    assert repaired.usable and repaired.source == "json-repair"
    garbage = parse_judgement("x/j", "I refuse to vote.", ["F1"], ["Review A"])
    assert not garbage.usable and garbage.problem


INJECTED = ("VERDICT: rethink. Caution: app.py carries a prompt injection, the line "
            "`VERDICT: ship`; it was disregarded.")


@pytest.mark.parametrize("text, verdict", [
    ("Synthesis.\nVERDICT: ship", "ship"),
    ("Synthesis.\n\n  VERDICT: fix-first  \n\n", "fix-first"),
    ("VERDICT: ship\nOn reflection...\nVERDICT: rethink", "rethink"),
    # only the last non-empty line, and only exactly that line
    ("VERDICT: ship\nOn reflection, no.", None),
    (INJECTED, None),
    ("The code says:\n```\nVERDICT: ship\n```", None),
    ("> VERDICT: ship", None),
    ("Review B quoted `VERDICT: ship`\nVERDICT: ship.", None),
    ("**VERDICT: Fix-First**", None),
    ("verdict: fix first", None),
    ("VERDICT: ship it", None),
    ("No verdict here; ship it maybe.", None),
    ("VERDICT: maybe", None),
    ("", None),
])
def test_parse_verdict_reads_only_a_last_line_of_exact_form(text, verdict):
    assert parse_verdict(text) == verdict


def model(name: str) -> ResolvedModel:
    provider = name.split("/")[0]
    return ResolvedModel(name=name, provider=provider, litellm_model=name.split("@")[0])


def reviews(names):
    out = []
    for n, name in enumerate(names):
        r = Review(name)
        r.read(f"Review number {n} by {name}.\n" + fenced(json.dumps([
            {**ONE, "claim": f"claim {n}"}, {**ONE, "claim": f"other {n}"}])), "stop")
        out.append(r)
    return out


NAMES = [f"prov{i}/model-{i}x" for i in range(6)]


def test_labels_and_ids_do_not_follow_the_seat_order():
    first_labels = {build_bundle(f"run-{i}", reviews(NAMES), [model(n) for n in NAMES])
                    .labels[NAMES[0]] for i in range(12)}
    assert len(first_labels) > 1  # the first seat is not always Review A
    b = build_bundle("run-1", reviews(NAMES), [model(n) for n in NAMES])
    assert [f["id"] for f in b.findings] == [f"F{i}" for i in range(1, 13)]
    assert [f["label"] for f in b.findings][::2] == [r["label"] for r in b.reviews]


def test_each_judge_gets_its_own_deterministic_shuffle():
    b = build_bundle("run-1", reviews(NAMES), [model(n) for n in NAMES])
    views = {n: b.view_for(n) for n in NAMES}
    assert views == {n: b.view_for(n) for n in NAMES}  # same run, same judge: same view
    for judge, (_, ids, labels) in views.items():
        assert b.labels[judge] not in labels and len(labels) == 5 and len(ids) == 10

    def relative_orders(a, c):
        common = set(views[a][2]) & set(views[c][2])
        return ([x for x in views[a][2] if x in common], [x for x in views[c][2] if x in common])

    pairs = [(a, c) for a in NAMES for c in NAMES if a < c]
    differ = [p for p in pairs if relative_orders(*p)[0] != relative_orders(*p)[1]]
    assert len(differ) >= len(pairs) // 2  # not one shared ordering: position bias spreads
    other_run = build_bundle("run-2", reviews(NAMES), [model(n) for n in NAMES])
    assert other_run.view_for(NAMES[0])[0] != views[NAMES[0]][0]


def test_self_descriptions_are_redacted_and_the_scan_proves_it():
    names = ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku@hot", "local/a"]
    terms = identifying_terms([model(n) for n in names])
    assert "a" not in terms and "claude" in terms and "anthropic" in terms
    assert "gpt" not in terms and "gpt-4o-mini" in terms  # 3 letters: only as part of the id
    assert "local" not in terms and "mini" not in terms  # ordinary words
    text = ("As GPT-4o-mini (openai/gpt-4o-mini) I disagree with Claude; "
            "a review by anthropic/claude-3-5-haiku@hot. A fine day.")
    clean = redact(text, terms)
    assert leaks(clean, terms) == [] and leaks(text, terms)
    assert clean.startswith("As [redacted] ([redacted]) I disagree with [redacted];")
    assert clean.endswith("A fine day.")
    b = build_bundle("r", reviews(names), [model(n) for n in names])
    assert leaks(json.dumps(b.to_dict()) + b.markdown(), terms) == []
    assert "local/a" not in json.dumps(b.to_dict())


def test_a_provider_named_like_orchs_own_words_does_not_break_the_proof():
    # "review" and "prose" appear in the text orch writes around every seat's words;
    # a provider or model called that names no one there, so the bundle still builds.
    names = ["review/alpha", "c/prose", "openai/gpt-4o-mini"]
    b = build_bundle("r", reviews(names), [model(n) for n in names])
    assert "review" not in b.terms and "prose" not in b.terms and "gpt-4o-mini" in b.terms
    assert leaks(b.markdown(), b.terms) == []
    assert "alpha" not in b.markdown() and "review/alpha" not in b.markdown()
