"""`orch fanout --rounds N` end to end: the real CLI, HTTP to the scripted server, a real SQLite
ledger; the scripted server's request log is the evidence of what each leg was shown."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter

import pytest

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


def quoted(prompt: str) -> dict[str, str]:
    """label -> quoted answer, from a round prompt."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"<<<(Answer [A-Z]) \[\w+\]\n(.*?)\n\1 \[\w+\]>>>", prompt, re.S)}


def block(**data) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def label_with(prompt: str, needle: str) -> str:
    return next(label for label, text in quoted(prompt).items() if needle in text)


def deliberating(model: str, *, adopt_in_round_2: bool, unreadable: bool = False):
    """A scripted leg: round 1 its own answer; later rounds vote for the lru_cache answer
    (or the first shown), and adopt it in round 2 when told to."""

    def reply(body, n):
        prompt = body["messages"][-1]["content"]
        if "<<<REPLY" in prompt:  # a repair prompt: still nothing readable
            return Reply(text="sorry, no block", usage=USAGE)
        if n == 0:
            return Reply(text=ROUND1[model], usage=USAGE)
        if unreadable and n == 1:
            return Reply(text="I keep mine. {{{ not json", usage=USAGE)
        shown = quoted(prompt)
        target = next((lb for lb, text in shown.items() if "lru_cache" in text), None)
        vote = target or sorted(shown)[0]
        if adopt_in_round_2 and n == 1 and target:
            return Reply(text=block(decision="adopt", adopt=target, vote=target,
                                    reason="the standard library already does this"),
                         usage=USAGE)
        return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                    reason="clear and correct"), usage=USAGE)
    return reply


def script(server, *, unreadable: str | None = None):
    for model in MODELS:
        server.script(model, deliberating(model, adopt_in_round_2=model != "llama-3-70b",
                                          unreadable=model == unreadable))


def fanout(*args):
    return invoke(["fanout", "-m", NAMES, "-p", "How do I build an LRU cache in Python?",
                   "--json", "--tools", "none", *args])


def rows(home):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend order by id")]


def round_prompts(server):
    """(model, round prompt) for every request that carried peers' answers."""
    return [(r.body["model"], r.body["messages"][-1]["content"]) for r in server.chats
            if "<<<Answer" in r.body["messages"][-1]["content"]]


@pytest.mark.usefixtures("both_ways")  # in-process and through orch serve
def test_three_legs_converge_and_stop_unchanged(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    script(scripted_server)
    result = fanout("--rounds", "5")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "deliberation" and doc["status"] == "complete"
    # round 1 differs; round 2: two legs adopt the third's; round 3: nobody changes
    r1, r2, r3 = doc["rounds"]
    assert len({leg["answer_digest"] for leg in r1["legs"]}) == 3
    assert [leg["changed"] for leg in r2["legs"]] == [True, True, False]
    assert len({leg["answer_digest"] for leg in r2["legs"]}) == 1
    assert [leg["changed"] for leg in r3["legs"]] == [False, False, False]
    assert doc["stop"] == {"rule": "unchanged", "after_round": 3, "also": ["consensus"]}
    # the winner by votes: the lru_cache answer, held by every leg now
    assert "lru_cache" in doc["winner"]["answer"] and doc["winner"]["votes"] == 3
    assert all("lru_cache" in leg["answer"] for leg in doc["legs"])
    for leg in r2["legs"]:
        assert leg["vote"] and leg["reason"] and leg["tokens"]["input_tokens"] == 1000
        assert leg["cost_usd"] == pytest.approx((1000 + 100) / 1e6)
    # every round's requests are ledger rows, the round in the wave id
    ledger = rows(orch_home)
    assert len(ledger) == 9 and len(scripted_server.chats) == 9
    by_round = {}
    for row in ledger:
        by_round.setdefault(row["wave_id"], []).append(row)
        assert row["run_id"] == doc["wave_id"]
    assert sorted(by_round) == [f"{doc['wave_id']}-round-{n}" for n in (1, 2, 3)]
    assert doc["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in ledger))
    spend = invoke(["spend", "--group-by", "round", "--json"])
    assert spend.exit_code == 0, spend.output
    groups = json.loads(spend.stdout)["groups"]
    assert [(g["key"], g["legs"]) for g in groups] == [("1", 3), ("2", 3), ("3", 3)]
    assert [g["cost_usd"] for g in groups] == [r["cost_usd"] for r in doc["rounds"]]
    # the document is on disk where orch status finds waves
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["rounds"] == doc["rounds"]


def test_every_round_prompt_is_anonymous_and_offers_no_self_vote(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    result = fanout("--rounds", "3")
    assert result.exit_code == 0, result.output
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 6
    marks = {"gpt-4o": "doubly linked", "qwen3-coder": "OrderedDict",
             "llama-3-70b": "functools"}
    for model, prompt in prompts:
        assert not IDENTIFYING.search(prompt), prompt
        shown = quoted(prompt)
        assert len(shown) == 2 and len(set(shown)) == 2  # two peers, two labels
        own = prompt.split("(yours: not votable)")[1].split("<<<")[0]
        assert marks[model] in own or "functools" in own  # its own (or adopted) answer
    for model, prompt in prompts[:3]:  # round 2: its own answer is among no votable one
        assert not any(marks[model] in text for text in quoted(prompt).values())
    # the history is kept: round 3 carries the leg's own round-1 and round-2 turns
    last = [r.body for r in scripted_server.chats][-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert last[0]["content"].strip() == "How do I build an LRU cache in Python?"
    assert "doubly linked" in last[1]["content"] or "OrderedDict" in last[1]["content"] \
        or "functools" in last[1]["content"]
    # a past round keeps the leg's own reply, not the peers' answers it was shown then
    assert "<<<Answer" not in last[2]["content"] and "Round 2" in last[2]["content"]
    assert last[3]["content"].endswith("```")  # its own round-2 reply, as it wrote it


def test_stops_on_rounds(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    doc = json.loads(fanout("--rounds", "2").stdout)
    assert len(doc["rounds"]) == 2 and doc["stop"]["rule"] == "rounds"
    assert doc["exit_code"] == 0


def test_stops_when_the_ceiling_cannot_pay_for_the_next_round(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=100.0, output_cost_per_mtok=100.0)
    script(scripted_server)
    # a round costs 3 x 1,050 tokens x $100/M = $0.315; its worst case a bit more (the
    # prompt grows, 50 output tokens reserved): two rounds fit in $0.8, a third does not
    result = fanout("--rounds", "5", "--max-cost", "0.8", "--output-budget", "50")
    doc = json.loads(result.stdout)
    assert doc["stop"]["rule"] == "ceiling" and doc["stop"]["after_round"] == 2, doc["stop"]
    assert len(doc["rounds"]) == 2 and len(rows(orch_home)) == 6
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


def test_the_chair_synthesises_the_final_round_and_is_told_the_votes(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    scripted_server.script("chair", Reply(text="The synthesis."))
    result = fanout("--rounds", "3", "--chair", "scripted/chair")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["chair"]["answer"] == "The synthesis."
    packet = scripted_server.requests_for("chair")[0].body["messages"][-1]["content"]
    assert "3 vote(s) in the last round (the winner by votes)" in packet
    assert packet.count("lru_cache") == 3  # the three final answers, nothing older
    assert doc["rounds"][-1]["round"] == 3 and doc["stop"]["rule"] == "unchanged"


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


def test_human_output_shows_rounds_stop_and_winner(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    result = invoke(["fanout", "-m", NAMES, "-p", "LRU?", "--tools", "none", "--rounds", "3"])
    assert result.exit_code == 0, result.output
    assert "orch: round 2/3: 3 legs" in result.stderr  # progress shows the round
    assert "Round 2: 3 legs · 2 changed · 3 votes" in result.stdout
    assert "Stopped: unchanged after round 3 (also: consensus, rounds)" in result.stdout
    assert "Winner by votes: scripted/gpt-4o, scripted/qwen3-coder, scripted/llama-3-70b" \
        in result.stdout


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
    leaky = deliberating("gpt-4o", adopt_in_round_2=True)
    scripted_server.script("gpt-4o", lambda body, n: Reply(text=f"Set OPENAI_KEY={key}.")
                           if n == 0 else leaky(body, n))
    result = fanout("--rounds", "2")
    assert result.exit_code == 0, result.output
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 3 and not any(key in p for _, p in prompts)


def test_a_leg_that_fails_in_round_two_leaves_with_its_answer_and_exit_2(orch, scripted_server):
    orch.provider()
    script(scripted_server)
    scripted_server.script("qwen3-coder", Reply(text=ROUND1["qwen3-coder"]),
                           Reply(status=400, error_message="bad request"))
    result = fanout("--rounds", "3")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["status"] == "complete"
    assert doc["legs"][1]["answer"] == ROUND1["qwen3-coder"]
    assert any("leg 2 (scripted/qwen3-coder) failed in round 2" in d for d in doc["degraded"])
    # it is not shown again: round 3's two legs read one peer each
    assert [len(r["legs"]) for r in doc["rounds"]] == [3, 3, 2]
    assert all(len(quoted(p)) == 1 for _, p in round_prompts(scripted_server)[-2:])
