"""`orch fanout --rounds N` end to end: the real CLI, HTTP to the scripted server, a real SQLite
ledger; the scripted server's request log is the evidence of what each leg was shown."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from ledger_rows import ledger_rows

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

MODELS = ("gpt-4o", "qwen3-coder", "llama-3-70b")
NAMES = ",".join(f"scripted/{m}" for m in MODELS)
ROUND1 = {
    "gpt-4o": "As GPT-4o from OpenAI: keep a dict and a doubly linked list.",
    "qwen3-coder": "Qwen here (Alibaba). Subclass collections.OrderedDict and move_to_end.",
    "llama-3-70b": "Use functools.lru_cache(maxsize=128) on the function; Meta Llama says so.",
}
# every name a leg of this run could be identified by, in any case
IDENTIFYING = re.compile(r"gpt|openai|qwen|alibaba|llama|meta\b|claude|anthropic", re.I)
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50}
_ROUND = re.compile(r"^Round (\d+) of at most", re.M)


def quoted(prompt: str) -> dict[str, str]:
    """label -> quoted answer, from a round prompt."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"<<<(Answer [A-Z]) \[\w+\]\n(.*?)\n\1 \[\w+\]>>>", prompt, re.S)}


def block(**data) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def label_with(prompt: str, needle: str) -> str:
    return next(label for label, text in quoted(prompt).items() if needle in text)


def scripted_leg(first: str, *plan):
    """A scripted leg: round 1 answers ``first``; round r >= 2 does ``plan[r - 2]`` (past the
    plan: keep): ``("keep", needle)``, ``("adopt", needle)``, ``("revise", text, needle)``
    or ``("garbage",)``. It votes for the first label whose answer contains ``needle``
    (else the first label shown); ``needle`` ``"!label"`` writes that label as it is."""

    def reply(body, n):
        prompt = body["messages"][-1]["content"]
        if "<<<REPLY" in prompt:  # a repair prompt: still nothing readable
            return Reply(text="sorry, no block", usage=USAGE)
        found = _ROUND.search(prompt)
        if not found:
            return Reply(text=first, usage=USAGE)
        r = int(found.group(1))
        step = plan[r - 2] if r - 2 < len(plan) else ("keep", "")
        shown = quoted(prompt)
        needle = step[-1] if len(step) > 1 else ""
        vote = needle[1:] if needle.startswith("!") else next(
            (lb for lb, text in shown.items() if needle and needle in text),
            sorted(shown)[0] if shown else "A")
        if step[0] == "garbage":
            return Reply(text="I keep mine. {{{ not json", usage=USAGE)
        if step[0] == "adopt":
            return Reply(text=block(decision="adopt", adopt=vote, vote=vote,
                                    reason="the standard library already does this"),
                         usage=USAGE)
        if step[0] == "revise":
            return Reply(text=step[1] + "\n\n" + block(decision="revise", vote=vote,
                                                        reason="better now"), usage=USAGE)
        return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                     reason="clear and correct"), usage=USAGE)
    return reply


def script(server, *, unreadable: str | None = None):
    """Round 1: three different answers; round 2: gpt and qwen adopt llama's lru_cache
    answer (each voting for it), llama keeps; ``unreadable``: that leg's round-2 reply has
    no readable block."""
    for model in MODELS:
        plan = [("garbage",)] if model == unreadable else [("keep", "")] \
            if model == "llama-3-70b" else [("adopt", "lru_cache")]
        server.script(model, scripted_leg(ROUND1[model], *plan))


def fanout(*args):
    return invoke(["fanout", "-m", NAMES, "-p", "How do I build an LRU cache in Python?",
                   "--json", "--tools", "none", *args])


def round_prompts(server):
    """(model, round prompt) for every request that carried peers' answers."""
    return [(r.body["model"], r.body["messages"][-1]["content"]) for r in server.chats
            if _ROUND.search(r.body["messages"][-1]["content"])]


@pytest.mark.usefixtures("both_ways")  # in-process and through orch serve
def test_three_legs_converge_and_stop_on_consensus_at_once(orch, scripted_server, orch_home):
    """Two legs adopt the third's answer in round 2: every leg now holds one answer, so the
    run stops there (no third round that could only repeat it). Their votes were for the
    answer they now hold themselves: self-votes, not counted; the winner is what all hold."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    script(scripted_server)
    result = fanout("--rounds", "5")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "deliberation" and doc["status"] == "complete"
    r1, r2 = doc["rounds"]
    assert len({leg["answer_digest"] for leg in r1["legs"]}) == 3
    assert [leg["changed"] for leg in r2["legs"]] == [True, True, False]
    assert len({leg["answer_digest"] for leg in r2["legs"]}) == 1
    assert doc["stop"] == {"rule": "consensus", "after_round": 2, "also": []}
    # every vote was cast, none counts: gpt's and qwen's are for the answer they adopted,
    # llama's for gpt's round-1 answer, which gpt left for llama's own
    assert all(leg["vote"] and leg["vote"]["answer_digest"] is None for leg in r2["legs"])
    assert all("self-vote" in leg["vote_problem"] for leg in r2["legs"])
    win = doc["winner"]
    assert "lru_cache" in win["answer"] and win["by"] == "holders" and win["votes"] == 0
    assert win["legs"] == [1, 2, 3] and win["holders"] == 3
    assert all("lru_cache" in leg["answer"] for leg in doc["legs"])
    assert doc["answers"] == [{"digest": win["digest"], "legs": [1, 2, 3],
                               "models": [f"scripted/{m}" for m in MODELS]}]
    for leg in r2["legs"]:
        assert leg["reason"] and leg["tokens"]["input_tokens"] == 1000
        assert leg["cost_usd"] == pytest.approx((1000 + 100) / 1e6)
    # every round's requests are ledger rows, the round in the wave id
    ledger = ledger_rows(orch_home)
    assert len(ledger) == 6 and len(scripted_server.chats) == 6
    by_round = {}
    for row in ledger:
        by_round.setdefault(row["wave_id"], []).append(row)
        assert row["run_id"] == doc["wave_id"]
    assert sorted(by_round) == [f"{doc['wave_id']}-round-{n}" for n in (1, 2)]
    assert doc["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in ledger))
    spend = invoke(["spend", "--group-by", "round", "--json"])
    assert spend.exit_code == 0, spend.output
    groups = json.loads(spend.stdout)["groups"]
    assert [(g["key"], g["legs"]) for g in groups] == [("1", 3), ("2", 3)]
    assert [g["cost_usd"] for g in groups] == [r["cost_usd"] for r in doc["rounds"]]
    # the document is on disk where orch status finds waves
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["rounds"] == doc["rounds"]


def test_identical_answers_in_round_one_stop_the_run_there(orch, scripted_server):
    """Three legs answering "The answer is 17." (spelled three ways) hold one answer: the
    deliberation stops after round 1; nobody votes for a peer's copy of its own answer."""
    orch.provider()
    for model, text in zip(MODELS, ("The answer is 17.", "the answer is **17**",
                                    "The  answer is 17"), strict=True):
        scripted_server.script(model, scripted_leg(text))
    doc = json.loads(fanout("--rounds", "3").stdout)
    assert doc["stop"] == {"rule": "consensus", "after_round": 1, "also": []}
    assert scripted_server.count() == 3 and doc["votes"] == [[]]
    assert doc["winner"]["by"] == "holders" and doc["winner"]["legs"] == [1, 2, 3]
    assert doc["exit_code"] == 0


def test_a_copy_of_a_legs_own_answer_is_never_offered_to_it(orch, scripted_server):
    """Four legs, three holding 17: each 17-holder is shown 18 alone (its copies are not
    votable: a vote for one would be a vote for its own answer), told how many it reads hold
    its answer; the 18-holder is shown 17 once. A 17-holder that names a label it was not
    shown casts no vote; the votes left count for what the legs hold."""
    orch.provider()
    models = ["m1", "m2", "m3", "m4"]
    for m in models[:3]:
        scripted_server.script(m, scripted_leg("The answer is 17.", ("keep", "!Answer B")))
    scripted_server.script("m4", scripted_leg("The answer is 18.", ("keep", "17")))
    result = invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in models), "-p", "Q?",
                     "--json", "--tools", "none", "--rounds", "2"])
    doc = json.loads(result.stdout)
    prompts = dict(round_prompts(scripted_server))
    for m in models[:3]:
        assert list(quoted(prompts[m]).values()) == ["The answer is 18."], prompts[m]
        assert "2 of the other answers you read are the same as yours" in prompts[m]
    assert list(quoted(prompts["m4"]).values()) == ["The answer is 17."]
    legs = doc["rounds"][1]["legs"]
    assert [leg["vote"] for leg in legs[:3]] == [None] * 3
    assert all("names none of Answer A" in leg["vote_problem"] for leg in legs[:3])
    assert legs[3]["vote"]["answer_digest"] == legs[0]["answer_digest"]
    win = doc["winner"]
    assert win["by"] == "votes" and win["votes"] == 1 and win["legs"] == [1, 2, 3]


def test_votes_count_what_the_legs_hold_at_the_end_never_a_stale_answer(orch, scripted_server):
    """Every leg revises in round 2 and votes for a peer's round-1 answer: each vote follows
    that answer's holder to the answer it holds now (nobody holds the old one), so the winner
    is a final answer, held by a leg; the three-way tie is broken by the rule it reports."""
    orch.provider()
    plan = {"gpt-4o": ("B1: a dict and a list, revised.", "OrderedDict"),
            "qwen3-coder": ("B2: OrderedDict, revised.", "lru_cache"),
            "llama-3-70b": ("B3: lru_cache, revised.", "doubly linked")}
    for model in MODELS:
        scripted_server.script(model, scripted_leg(ROUND1[model],
                                                   ("revise", *plan[model])))
    doc = json.loads(fanout("--rounds", "2").stdout)
    finals = {leg["answer_digest"] for leg in doc["rounds"][1]["legs"]}
    assert len(finals) == 3
    # gpt voted for qwen's round-1 answer: it counts for qwen's B2, and so on
    votes = {leg["leg"]: leg["vote"] for leg in doc["rounds"][1]["legs"]}
    digest_of = {leg["leg"]: leg["answer_digest"] for leg in doc["rounds"][1]["legs"]}
    assert votes[1]["answer_digest"] == digest_of[2] and votes[2]["answer_digest"] == digest_of[3]
    assert votes[3]["answer_digest"] == digest_of[1]
    win = doc["winner"]
    assert win["digest"] in finals and win["legs"] and win["answer"].startswith("B1")
    assert win["votes"] == 1 and sorted(win["tied_with"]) == sorted(finals - {win["digest"]})
    assert win["tie_break"] == "the answer held by the leg earliest in --models"


def test_own_answer_is_sent_once_per_round_and_prompts_are_anonymous(orch, scripted_server):
    """Round 2: gpt adopts llama's answer, qwen revises, llama keeps; round 3: all keep. Every
    request holds the leg's own current answer exactly once: pointed at in its conversation
    when it is there word for word (round 1's answer, a revision), written out when adopted."""
    orch.provider()
    revised = "Revised: OrderedDict with move_to_end and popitem(last=False)."
    scripted_server.script("gpt-4o", scripted_leg(ROUND1["gpt-4o"], ("adopt", "lru_cache")))
    scripted_server.script("qwen3-coder", scripted_leg(ROUND1["qwen3-coder"],
                                                       ("revise", revised, "lru_cache")))
    scripted_server.script("llama-3-70b", scripted_leg(ROUND1["llama-3-70b"],
                                                       ("keep", "OrderedDict")))
    result = fanout("--rounds", "4")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["stop"]["rule"] == "unchanged" and doc["stop"]["after_round"] == 3
    own = {"gpt-4o": [ROUND1["llama-3-70b"]], "qwen3-coder": [revised],
           "llama-3-70b": [ROUND1["llama-3-70b"]]}
    prompts = [r for r in scripted_server.chats if _ROUND.search(r.body["messages"][-1]
                                                                  ["content"])]
    assert len(prompts) == 6
    for r in prompts[3:]:  # round 3
        model, messages = r.body["model"], r.body["messages"]
        everything = "\n".join(m["content"] for m in messages)
        for text in own[model]:
            core = text.split("; Meta")[0]  # the prompt's copy is redacted past this point
            assert everything.count(core) == 1, (model, everything)
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant",
                                                  "user"]
        prompt = messages[-1]["content"]
        assert not IDENTIFYING.search(prompt), prompt
        mine = prompt.split("(yours: not votable)")[1].split("<<<")[0]
        if model == "gpt-4o":
            assert "lru_cache" in mine  # adopted: written out
        elif model == "qwen3-coder":
            assert "The answer you wrote in round 2 above" in mine and "OrderedDict" not in mine
        else:
            assert "Your round-1 answer above, unchanged." in mine
        # a past round keeps the leg's own reply, not the peers' answers it was shown then
        assert "<<<Answer" not in messages[2]["content"] and "Round 2" in messages[2]["content"]
    for r in prompts[:3]:  # round 2: no label for its own answer, every prompt anonymous
        prompt, model = r.body["messages"][-1]["content"], r.body["model"]
        assert not IDENTIFYING.search(prompt), prompt
        assert len(quoted(prompt)) == 2
        assert ROUND1[model][10:30] not in "".join(quoted(prompt).values())


def test_replies_no_one_could_read_degrade_the_run(orch, scripted_server):
    """Every round-2 reply is unreadable (even after its repair prompt): the run stops
    there (another round buys nothing), says why, and exits 2, not a clean "unchanged"."""
    orch.provider()
    for model in MODELS:
        scripted_server.script(model, scripted_leg(ROUND1[model], ("garbage",)))
    result = fanout("--rounds", "3")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["status"] == "complete"
    assert doc["stop"] == {"rule": "unread", "after_round": 2, "also": ["unchanged"]}
    assert any(d.startswith("no vote of rounds 2-2 could be read (3 replies, 3 unreadable)")
               for d in doc["degraded"])
    assert scripted_server.count() == 9  # round 1, round 2, its three repairs; no round 3
    human = invoke(["fanout", "-m", NAMES, "-p", "Q?", "--tools", "none", "--rounds", "3"])
    assert human.exit_code == 2 and "orch: warning: degraded: no vote of rounds 2-2 could be " \
        "read" in human.stderr and "degraded" not in human.stdout  # said, not printed


def test_stops_on_rounds(orch, scripted_server):
    orch.provider()
    for model in MODELS:  # everyone keeps, one leg revises every round: never unchanged
        plan = [("revise", f"round {r} text", "") for r in (2, 3)] \
            if model == "gpt-4o" else []
        scripted_server.script(model, scripted_leg(ROUND1[model], *plan))
    doc = json.loads(fanout("--rounds", "2").stdout)
    assert len(doc["rounds"]) == 2 and doc["stop"]["rule"] == "rounds"
    assert doc["exit_code"] == 0


def test_stops_when_the_ceiling_cannot_pay_for_the_next_round(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=100.0, output_cost_per_mtok=100.0)
    for model in MODELS:
        plan = [("revise", f"round {r} text", "") for r in range(2, 6)] \
            if model == "gpt-4o" else []
        scripted_server.script(model, scripted_leg(ROUND1[model], *plan))
    # a round costs 3 x 1,050 tokens x $100/M = $0.315; its worst case a bit more (the
    # prompt grows, 50 output tokens reserved): two rounds fit in $0.8, a third does not
    result = fanout("--rounds", "5", "--max-cost", "0.8", "--output-budget", "50")
    doc = json.loads(result.stdout)
    assert doc["stop"]["rule"] == "ceiling" and doc["stop"]["after_round"] == 2, doc["stop"]
    assert len(doc["rounds"]) == 2 and len(ledger_rows(orch_home)) == 6
    assert doc["cost_usd"] <= 0.8
    assert result.exit_code == 2 and any("round 3" in d for d in doc["degraded"])


def test_an_unreadable_reply_keeps_the_previous_answer_and_says_so(orch, scripted_server):
    orch.provider()
    script(scripted_server, unreadable="qwen3-coder")
    doc = json.loads(fanout("--rounds", "2").stdout)
    leg = doc["rounds"][1]["legs"][1]
    assert leg["readable"] is False and leg["vote"] is None and leg["changed"] is False
    assert leg["answer_digest"] == doc["rounds"][0]["legs"][1]["answer_digest"]
    assert any("could not be read" in n and "is kept" in n for n in doc["notices"])
    # one repair prompt was sent, in its own wave of round 2
    repairs = [r for r in scripted_server.chats
               if "<<<REPLY" in r.body["messages"][-1]["content"]]
    assert len(repairs) == 1
    assert not any("no vote of rounds" in d for d in doc["degraded"])  # others voted


def test_peers_needs_rounds(orch):
    result = invoke(["fanout", "-m", NAMES, "-p", "x", "--peers", "2"])
    assert result.exit_code == 2 and "--rounds" in result.output


def test_spend_groups_by_round_on_every_backend(ledger_url):
    """The round is read from the wave id (``<run>-round-<N>``) in SQL on SQLite and
    PostgreSQL; rows of other runs (a council's ``<run>-review``) have no round."""
    from orchestrator.ledger.spend import Ledger

    def row(wave_id, run_id, cost):
        return {"wave_id": wave_id, "leg_id": f"{wave_id}-1", "kind": "leg", "model": "s/m",
                "provider": "s", "status": "complete", "cost_usd": cost, "run_id": run_id}

    ledger = Ledger(ledger_url)
    for wave_id, run_id, cost in [("r1-round-1", "r1", 1.0), ("r1-round-2", "r1", 2.0),
                                  ("r1-round-2-repair", "r1", 0.5), ("r1-round-10", "r1", 4.0),
                                  ("r1-round-chair", "r1", 3.0), ("c9-review", "c9", 8.0),
                                  ("plain", None, 16.0),
                                  # a bench's deliberating trials: one level further down
                                  ("b7-t0001-round-1", "b7", 32.0),
                                  ("b7-t0002-round-2", "b7", 64.0), ("b7-t0003", "b7", 128.0)]:
        ledger.append(row(wave_id, run_id, cost))
    groups = ledger.rollup(group_by="round")["groups"]
    assert [(g["key"], g["cost_usd"], g["legs"]) for g in groups] == [
        ("1", 33.0, 2), ("2", 66.0, 2), ("10", 4.0, 1), ("2-repair", 0.5, 1), ("chair", 3.0, 1),
        (None, 152.0, 3)]


def test_the_chair_reads_each_final_answer_once_with_its_holders(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    scripted_server.script("chair", Reply(text="The synthesis."))
    result = fanout("--rounds", "3", "--chair", "scripted/chair")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["chair"]["answer"] == "The synthesis."
    packet = scripted_server.requests_for("chair")[0].body["messages"][-1]["content"]
    assert ("held by 3 legs; 0 vote(s) from other legs in the deciding round (support 3) "
            "(the winner)") in packet
    assert packet.count("lru_cache") == 1  # one final answer, held by three legs, once
    assert "### scripted/gpt-4o, scripted/qwen3-coder, scripted/llama-3-70b (" in packet
    assert doc["rounds"][-1]["round"] == 2 and doc["stop"]["rule"] == "consensus"


def test_the_deliberation_chair_is_told_which_answers_were_cut(orch, scripted_server):
    """An answer cut at its output limit keeps its CUT mark into the chair's packet, the
    same mark a fanout's chair and a council's chair read (chair/marks.py)."""
    orch.provider()
    cut = scripted_leg(ROUND1["gpt-4o"])

    def gpt(body, n):
        if n == 0:
            return Reply(text="Keep a dict and a doubly linked li", finish_reason="length",
                         usage=USAGE)
        return cut(body, n)

    scripted_server.script("gpt-4o", gpt)
    scripted_server.script("qwen3-coder", scripted_leg(ROUND1["qwen3-coder"]))
    scripted_server.script("llama-3-70b", scripted_leg(ROUND1["llama-3-70b"]))
    scripted_server.script("chair", Reply(text="The synthesis."))
    doc = json.loads(fanout("--rounds", "3", "--chair", "scripted/chair").stdout)
    assert doc["stop"]["rule"] == "unchanged"
    packet = scripted_server.requests_for("chair")[0].body["messages"][-1]["content"]
    heads = [line for line in packet.splitlines() if line.startswith("### ")]
    assert len(heads) == 3
    assert "CUT: stopped at its output limit (OUTPUT_LENGTH)" in heads[0], heads
    assert not any("CUT" in h for h in heads[1:])


def test_peers_k_shows_each_leg_k_answers(orch, scripted_server):
    orch.provider()
    names = [f"m{i}" for i in range(6)]
    for i, name in enumerate(names):
        scripted_server.script(name, Reply(text=f"answer {i}"), Reply(
            text=block(decision="keep", vote="A", reason="fine")))
    result = invoke(["fanout", "-m", ",".join(f"scripted/{n}" for n in names), "-p", "Q?",
                     "--json", "--tools", "none", "--rounds", "2", "--peers", "2"])
    assert result.exit_code == 0, result.output
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 6 and all(len(quoted(p)) == 2 for _, p in prompts)
    # each round-1 answer is shown to exactly two legs (a regular graph)
    shown = Counter(text for _, p in prompts for text in quoted(p).values())
    assert sorted(shown.values()) == [2] * 6
    doc = json.loads(result.stdout)
    assert doc["options"]["peers"] == 2 and doc["stop"]["rule"] == "unchanged"


def test_human_output_shows_rounds_stop_and_winner_and_a_shared_answer_once(
        orch, scripted_server):
    orch.provider()
    script(scripted_server)
    result = invoke(["fanout", "-m", NAMES, "-p", "LRU?", "--tools", "none", "--rounds", "3"])
    assert result.exit_code == 0, result.output
    assert "orch: round 2/3: 3 legs" in result.stderr  # progress shows the round
    # the rounds and the stop rule are said on stderr; the winner is the output
    assert "orch: round 2: 3 legs · 2 changed · 3 votes cast, 0 counted" in result.stderr
    assert "orch: stopped: consensus after round 2" in result.stderr
    names = "scripted/gpt-4o, scripted/qwen3-coder, scripted/llama-3-70b"
    assert f"Winner: {names} (held by 3 of 3 legs; no vote counted)" in result.stdout
    assert f"The answer of {names} (3 legs, the same answer):" in result.stdout
    assert result.stdout.count("functools.lru_cache") == 1  # printed once


def test_a_refusal_before_round_one_is_one_line_and_leaves_a_document(orch, scripted_server,
                                                                       orch_home):
    """A wave_start refusal (here: a thinking level the models do not declare) ends the
    deliberation as it ends a fanout: one line, exit 2, and a wave.json saying why."""
    orch.provider()
    script(scripted_server)
    plain = fanout("--thinking", "high")
    result = fanout("--rounds", "3", "--thinking", "high")
    assert result.exit_code == plain.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert result.output.splitlines()[-1] == plain.output.splitlines()[-1]
    assert scripted_server.count() == 0
    docs = [json.loads(p.read_text()) for p in (orch_home / "runs").glob("*/wave.json")
            if json.loads(p.read_text()).get("kind") == "deliberation"]
    assert len(docs) == 1 and docs[0]["status"] == "error"


def test_an_interrupt_in_round_two_aborts_with_the_document(orch, scripted_server, orch_home):
    """A signal mid-round aborts that round's legs, starts no further round (nor the chair)
    and still writes wave.json: status aborted, exit 128+signal, the answers so far kept."""
    import signal

    import anyio

    from orchestrator import runtime
    from orchestrator.deliberation.run import Deliberation
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import WaveSpec
    from orchestrator.models.resolve import resolve_all
    from orchestrator.plugin_host.plugins import load

    orch.provider()
    for model in MODELS:
        scripted_server.script(model, Reply(text=ROUND1[model]), Reply(hang=True))
    cfg = runtime.config()
    pm = load(cfg.section("plugins"), enabled=True, third_party=False)
    models = resolve_all([f"scripted/{m}" for m in MODELS], cfg, pm)
    chair = resolve_all(["scripted/chair"], cfg, pm)[0]
    spec = WaveSpec(models=models, briefing="Q?", runs_dir=orch_home / "runs", chair=chair,
                    options={"tools": "none"})
    run = Deliberation(spec, pm=pm, config=cfg, rounds=3, peers=None, ledger=LedgerSink())

    async def main():
        async with anyio.create_task_group() as tg:
            async def stop_in_round_two():
                while scripted_server.in_flight < 3 or scripted_server.count() < 6:
                    await anyio.sleep(0.02)
                run.interrupt(signal.SIGINT)
            tg.start_soon(stop_in_round_two)
            return await run.run()

    doc = anyio.run(main)
    assert doc["status"] == "aborted" and doc["exit_code"] == 130
    assert [r["round"] for r in doc["rounds"]] == [1, 2]
    assert {leg["status"] for leg in doc["rounds"][1]["legs"]} == {"aborted"}
    assert doc["stop"]["rule"] == "interrupted" and doc["chair"] is None
    assert scripted_server.count() == 6  # no round 3, no chair
    assert [leg["answer"] for leg in doc["legs"]] == [ROUND1[m] for m in MODELS]
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["status"] == "aborted"


def test_a_key_a_leg_echoes_never_reaches_its_peers(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    key = "sk-proj-abcdef0123456789abcdef0123456789abcdEFGH"
    leaky = scripted_leg(ROUND1["gpt-4o"], ("adopt", "lru_cache"))
    scripted_server.script("gpt-4o", lambda body, n: Reply(text=f"Set OPENAI_KEY={key}.")
                           if n == 0 else leaky(body, n))
    result = fanout("--rounds", "2")
    assert result.exit_code == 0, result.output
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 3 and not any(key in p for _, p in prompts)


def test_a_leg_that_fails_in_round_two_leaves_with_its_answer_and_exit_2(orch, scripted_server):
    orch.provider()
    scripted_server.script("gpt-4o", scripted_leg(ROUND1["gpt-4o"],
                                                  ("revise", "A dict and a list, revised.", "")))
    scripted_server.script("qwen3-coder", Reply(text=ROUND1["qwen3-coder"]),
                           Reply(status=400, error_message="bad request"))
    scripted_server.script("llama-3-70b", scripted_leg(ROUND1["llama-3-70b"]))
    result = fanout("--rounds", "3")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["status"] == "complete"
    assert doc["legs"][1]["answer"] == ROUND1["qwen3-coder"]
    assert any("leg 2 (scripted/qwen3-coder) failed in round 2" in d for d in doc["degraded"])
    # it is not shown again: round 3's two legs read one peer each
    assert [len(r["legs"]) for r in doc["rounds"]] == [3, 3, 2]
    assert all(len(quoted(p)) == 1 for _, p in round_prompts(scripted_server)[-2:])
