"""Properties the council's pure parts must keep whatever the input: the verdict comes only
from an exact last line; the tally's tiers are total and never count a co-author; no seat
identifier survives redaction, however it is embedded in text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.council.anonymity import identifying_terms
from orchestrator.council.bundle import leaks, redact
from orchestrator.council.chair import VERDICTS, parse_verdict
from orchestrator.council.tally import TIERS, tally
from orchestrator.models.addressing import ResolvedModel

prose = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@given(prose, st.sampled_from(VERDICTS), st.text(" \t\n", max_size=5))
def test_an_exact_last_line_is_the_verdict_whatever_precedes_it(before, verdict, trailing):
    assert parse_verdict(f"{before}\nVERDICT: {verdict}{trailing}") == verdict


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1].strip()


@given(prose, st.sampled_from(VERDICTS), prose.filter(
    lambda t: t.strip() and not _last_line(t).startswith("VERDICT:")))
def test_a_verdict_followed_by_any_other_line_does_not_count(before, verdict, after):
    assert parse_verdict(f"{before}\nVERDICT: {verdict}\n{after}") is None


@given(st.sampled_from(VERDICTS), prose)
def test_a_verdict_with_anything_after_it_on_its_line_does_not_count(verdict, tail):
    line = f"VERDICT: {verdict}{tail}"
    if "\n" in tail or "\r" in tail or not tail.strip() or any(
            c in tail for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        return  # a line break, or only spaces: another case
    assert parse_verdict(f"Synthesis.\n{line}") is None


SEATS = ["a", "b", "c", "d", "e"]
finding = st.fixed_dictionaries({
    "seat": st.sampled_from(SEATS),
    "claim": st.sampled_from(["parser drops the last byte", "frame parser drops last byte",
                              "missing timeout on socket read", "socket read logs nothing"]),
    "location": st.sampled_from(["io.py:9", "io.py:11", "net.py:40", "io.py:30"]),
    "severity": st.sampled_from(["blocker", "major", "minor", "nit"]),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(finding, min_size=1, max_size=8),
       st.lists(st.tuples(st.sampled_from(SEATS), st.integers(0, 7),
                          st.sampled_from(["agree", "dispute", "neutral"])), max_size=30),
       st.sets(st.sampled_from(SEATS)))
def test_every_group_gets_exactly_one_tier_over_its_eligible_judges(raw, raw_votes, judges):
    findings = [{**f, "id": f"F{i + 1}"} for i, f in enumerate(raw)]
    votes = [{"judge": j, "finding": f"F{n % len(findings) + 1}", "vote": v, "reason": ""}
             for j, n, v in raw_votes]
    out = tally(SEATS, findings, votes, {}, judges=sorted(judges))
    assert sum(out["tiers"].values()) == len(out["groups"])
    assert sorted(f for g in out["groups"] for f in g["findings"]) == sorted(
        f["id"] for f in findings)
    for g in out["groups"]:
        c = g["counts"]
        eligible = sorted(j for j in judges if j not in g["seats"])
        assert sorted(g["stances"]) == eligible and c["judges"] == len(eligible)
        assert c["agree"] + c["dispute"] + c["neutral"] == c["judges"]
        assert all(v["judge"] in eligible for v in g["votes"])
        assert g["tier"] in TIERS
        assert (g["tier"] == "disputed") == (2 * c["dispute"] > c["judges"])
        assert (g["tier"] == "confirmed") == (2 * c["agree"] > c["judges"] and not c["dispute"])
        assert len({m["seat"] for m in g["claims"]}) == len(g["claims"])


MODELS = [ResolvedModel(name="openai/gpt-4o-mini", provider="openai",
                        litellm_model="openai/gpt-4o-mini"),
          ResolvedModel(name="myvllm/qwen3-8b@hot", provider="myvllm",
                        litellm_model="openai/qwen3-8b", declared=True)]
TERMS = identifying_terms(MODELS)
spellings = st.sampled_from(["gpt-4o-mini", "GPT 4o mini", "gpt4o-mini", "openai/gpt-4o-mini",
                             "OpenAI", "qwen3-8b", "Qwen3 8B", "QWEN", "myvllm/qwen3-8b@hot",
                             "qwen3_8b"])
glue = st.sampled_from([" ", ", ", " (", ") ", "\n", ": ", " — ", "'s ", ".", " `"])


@given(st.lists(st.tuples(st.sampled_from(["the local cache", "work queue", "a mini fix",
                                           "review", "as", "I think"]), glue, spellings, glue),
                min_size=1, max_size=6))
def test_no_identifier_survives_whatever_surrounds_it(parts):
    text = "".join(w + g1 + s + g2 for w, g1, s, g2 in parts)
    clean = redact(text, TERMS)
    assert leaks(clean, TERMS) == []
    assert "local" in clean or "local" not in text  # ordinary words stay
