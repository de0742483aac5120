"""A deliberation: ``orch fanout --rounds N``. Round 1 is a plain fanout; in each later round
every leg still in play reads its peers' previous answers (anonymised), revises, keeps or
adopts, and votes for the best other answer. Each round is one wave on one shared server,
every request a ledger row under the run id, the round in the wave id (docs/deliberation.md).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from orchestrator import jobscope, run_ceiling
from orchestrator.config import Config
from orchestrator.council.anonymity import identifying_terms
from orchestrator.council.bundle import leaks, new_nonce
from orchestrator.deliberation import rules
from orchestrator.deliberation.cost import round_bound
from orchestrator.deliberation.reply import (
    INSTRUCTION,
    Reading,
    past_round,
    payload,
    read_reply,
    repair_prompt,
    round_prompt,
    take_repair,
)
from orchestrator.engine.degraded import reporter
from orchestrator.engine.ledger_sink import LedgerSink
from orchestrator.engine.record import COMPLETE, ERROR, LegRecord
from orchestrator.engine.wave import Wave, WaveSpec, build_document, new_wave_id
from orchestrator.intake import Anonymity
from orchestrator.ledger.schema import ROUND_INFIX
from orchestrator.models.addressing import ResolvedModel
from orchestrator.models.server import Server
from orchestrator.plugin_host.hooks import HookRunner
from orchestrator.request import Usage
from orchestrator.security.secrets import scrub
from orchestrator.store import write_json_atomic

CHAIR_BRIEF = """You are the chair. Several models were given the briefing below and \
deliberated over {rounds} round(s): each read the others' answers, anonymised, revised or \
kept its own, and voted for the best other answer. Their final answers and the votes of the \
last round are below. Write one synthesis: what they agree on, where they differ and which \
side the evidence favours, and your own conclusion. Votes are a signal, not proof."""


def round_wave_id(run_id: str, round_no: int | str) -> str:
    """Where a round's number lives in the ledger: its wave id (docs/spend.md); the chair's
    wave is round ``chair``, a round's repair prompts ``<N>-repair``."""
    return f"{run_id}{ROUND_INFIX}{round_no}"


@dataclass
class Seat:
    """One leg across rounds: its current answer and its own conversation."""

    n: int  # 1-based, in the order of --models
    model: ResolvedModel
    answer: str = ""
    digest: str | None = None
    in_play: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    records: list[LegRecord] = field(default_factory=list)
    last_input: int = 0  # the prompt tokens its last request reported (cost bound's anchor)


class Deliberation:
    def __init__(self, spec: WaveSpec, *, pm, config: Config, rounds: int, peers: int | None,
                 ledger: LedgerSink | None = None, observe=None,
                 say: Callable[[str], None] | None = None, server: Server | None = None,
                 ceiling_state: dict[str, Any] | None = None,
                 spent: Callable[[], float] | None = None) -> None:
        """``server``, ``ceiling_state`` and ``spent``: a host running several deliberations
        under one rate gate and one cost ceiling (a bench, bakeoff/deliberating.py) gives
        its server, the ceiling account its waves share, and what that ceiling has spent so
        far; alone, a deliberation has its own server and its ceiling is its own."""
        self.spec, self.pm, self.config = spec, pm, config
        self.max_rounds, self.ledger, self.observe = rounds, ledger, observe
        self.say = say or (lambda text: None)
        self.run_id = spec.wave_id or new_wave_id()
        self.ledger_run = spec.run_id or self.run_id  # a bench's trial: the bench's id
        self.dir = spec.runs_dir / self.run_id
        # one gate and counters for all rounds (a host's: for all its trials too)
        self.server = server or Server(timeout_s=spec.timeout_s)
        self.ceiling_state, self._spent = ceiling_state, spent
        self.ceilings = run_ceiling.given(spec.options, pm)  # {key: dollars}, e.g. max_cost
        self.seats = [Seat(n, m) for n, m in enumerate(spec.models, start=1)]
        n = len(self.seats)
        self.peers = rules.default_peers(n) if peers is None else max(1, min(peers, n - 1))
        self.nonce = new_nonce()
        terms = identifying_terms(spec.models + ([spec.chair] if spec.chair else []))
        scaffold = round_prompt(round_no=2, max_rounds=3, own="", peers={"Answer A": ""},
                                nonce="0") + INSTRUCTION
        scaffold += past_round(2, 1)
        self.terms = [t for t in terms if not leaks(scaffold, [t])]  # orch's words name no one
        # every request of a later round, at the wire: the same folded terms; the user's
        # briefing (the first turn of each leg's history) exempt
        self.anonymity = Anonymity(tuple(self.terms), exempt=(spec.briefing,))
        self.redacted = 0  # spellings taken out of the answers legs were shown
        self.rounds: list[dict[str, Any]] = []
        self.records: list[LegRecord] = []
        self.refusals: list[dict[str, Any]] = []
        self.notices: list[str] = []
        self.stop: dict[str, Any] | None = None
        self.chair: LegRecord | None = None
        self.signum: int | None = None
        self._current: Wave | None = None
        self._ballots: list[rules.Ballot] = []  # the last round's, for the stop rules
        self.dropped: list[str] = []  # legs that failed in a later round (exit 2)
        self.failure: str | None = None  # what stopped the run early, if anything raised
        self.answers: dict[str, str] = {}  # digest -> answer, every answer any round held

    def notice(self, text: str) -> None:
        text = scrub(text)
        if text not in self.notices:
            self.notices.append(text)

    # -- running -----------------------------------------------------------------------
    async def run(self, *, handle_signals: bool = False) -> dict[str, Any]:
        from orchestrator.config import unwritable

        try:
            self.dir.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise unwritable(self.spec.runs_dir, exc) from None
        self._begun = self.started()
        write_json_atomic(self.dir / "wave.json", self._begun)
        jobscope.run_started(self.run_id)  # a daemon's client names it if the daemon dies
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:
            if handle_signals:
                tg.start_soon(jobscope.watch, self.interrupt, lambda: self.signum is not None)
            try:
                await self._rounds()
                if self.signum is None and self.spec.chair is not None:
                    await self._chair()
            except Exception as exc:  # raised below, outside the group: one line, not a group
                failed = exc
            tg.cancel_scope.cancel()
        if failed is not None:
            self.failure = scrub(f"{type(failed).__name__}: {failed}")
            self.notice(f"stopped: {self.failure}")
            write_json_atomic(self.dir / "wave.json", self.document())
            raise failed
        doc = self.document()
        write_json_atomic(self.dir / "wave.json", doc)
        return doc

    def started(self) -> dict[str, Any]:
        """``wave.json`` as the run begins: ``running``, and the process that runs it, so a
        killed deliberation is found and repaired from its round waves (engine/rebuild.py)
        instead of being a folder nothing names."""
        from orchestrator.engine.record import now_iso
        from orchestrator.pids import process_started

        return build_document(
            wave_id=self.run_id, status="running", legs=[], chair=None,
            runs_dir=self.spec.runs_dir,
            extra={"kind": "deliberation", "created_at": now_iso(), "tag": self.spec.tag,
                   "run_id": self.ledger_run, "project_dir": self.spec.project_dir,
                   "models": [m.name for m in self.spec.models],
                   "chair_model": self.spec.chair.name if self.spec.chair else None,
                   "options": {**self.spec.options, "rounds": self.max_rounds,
                               "peers": self.peers},
                   "pid": os.getpid(), "pid_started": process_started(os.getpid()),
                   "client_pid": jobscope.client_pid(), "rounds": []})

    def interrupt(self, signum: int) -> None:
        self.signum = signum
        if self._current is not None:
            self._current.interrupt(signum)

    async def _wave(self, wave_id: str, models: list[ResolvedModel], briefings: list[str],
                    histories: list[list[dict]] | None = None, kind: str | None = None,
                    round_no: int | None = None,
                    anonymity: Anonymity | None = None) -> list[LegRecord]:
        options = {**self.spec.options, "deliberation": self.run_id, "round": round_no}
        if self.ceiling_state is None:  # each wave's ceiling is what the run has left
            options.update({key: self.left(key) for key in self.ceilings})
        # (a shared ceiling account counts every wave's spend itself: the whole ceiling)
        spec = WaveSpec(models=models, briefing=self.spec.briefing, briefings=briefings,
                        histories=histories, runs_dir=self.dir / "rounds",
                        timeout_s=self.spec.timeout_s, max_steps=self.spec.max_steps,
                        kind=kind or self.spec.kind, run_id=self.ledger_run, wave_id=wave_id,
                        tag=self.spec.tag,
                        project_dir=self.spec.project_dir, workspace=self.spec.workspace,
                        options=options, later=[self.spec.chair] if self.spec.chair else [],
                        anonymity=anonymity)
        wave = Wave(spec, pm=self.pm, config=self.config, ledger=self.ledger,
                    observe=self.observe, server=self.server)
        if self.ceiling_state is not None:
            wave.context.state = self.ceiling_state
        self._current = wave
        try:
            doc = await wave.run()
        finally:
            self._current = None
        self.records += wave.records
        self.refusals += wave.budget_refusals
        for text in doc.get("notices") or []:
            self.notice(f"{wave_id}: {text}")
        return wave.records

    def spent(self) -> float:
        return sum(r.cost_usd for r in self.records if r.cost_usd is not None)

    def left(self, key: str | None = None) -> float:
        """What the ceiling (``key``; else the tightest) has left: of the run's own, or of
        the host's shared one."""
        spent = self._spent() if self._spent is not None else self.spent()
        return min(run_ceiling.left(self.ceilings[k], spent)
                   for k in ([key] if key else self.ceilings))

    async def _rounds(self) -> None:
        self.say(f"round 1/{self.max_rounds}: {len(self.seats)} legs")
        recs = await self._wave(round_wave_id(self.run_id, 1), [s.model for s in self.seats],
                                [self.spec.briefing] * len(self.seats), round_no=1)
        entry = []
        for seat, rec in zip(self.seats, recs, strict=True):
            seat.records.append(rec)
            seat.last_input = rec.usage.input_tokens
            if rec.status == COMPLETE and (rec.answer or "").strip():
                seat.answer, seat.in_play = rec.answer, True
                seat.digest = rules.digest(seat.answer)
                seat.history = [{"role": "user", "content": self.spec.briefing},
                                {"role": "assistant", "content": rec.answer}]
            entry.append(self._leg_entry(seat, rec, None, None, changed=None))
        self._record_round(1, entry, [])
        for round_no in range(2, self.max_rounds + 2):
            if self.signum is not None:
                return
            held = rules.stop_rules(self._ballots, round_no=round_no - 1,
                                    max_rounds=self.max_rounds,
                                    in_play=sum(s.in_play for s in self.seats))
            if held:
                self.stop = {"rule": held[0], "after_round": round_no - 1, "also": held[1:]}
                return
            if not await self._round(round_no):
                return

    async def _round(self, round_no: int) -> bool:
        """Round ``round_no``; False when the ceiling could not pay for it (not launched)."""
        playing = [s for s in self.seats if s.in_play]
        graph = rules.peer_graph(len(playing), self.peers, self.run_id, round_no)
        prompts, shown = [], []
        for i, seat in enumerate(playing):
            labels = rules.deal_labels(graph[i], self.run_id, round_no, seat.n)
            peers = {label: playing[j] for label, j in labels.items()}
            shown.append(peers)
            # a key a leg echoed never reaches another model (scrub), nor a name (redact)
            prompt = round_prompt(round_no=round_no, max_rounds=self.max_rounds,
                                  own=self._redact(scrub(seat.answer)), nonce=self.nonce,
                                  peers={lb: self._redact(scrub(p.answer))
                                         for lb, p in peers.items()})
            found = leaks(prompt, self.terms)
            if found:  # redaction and the scan share one pattern: a bug, not bad luck
                raise RuntimeError(f"a round-{round_no} prompt still names {found}")
            prompts.append(prompt)
        if self.ceilings:
            bound = round_bound(playing, prompts, self.spec.options, self.config)
            if bound is not None and bound > self.left():
                self.notice(f"round {round_no} was not launched: its worst case "
                            f"${bound:.4f} is more than the ${self.left():.4f} the cost "
                            "ceiling has left")
                self.stop = {"rule": rules.CEILING, "after_round": round_no - 1, "also": [],
                             "bound_usd": round(bound, 8), "left_usd": self.left()}
                return False
        self.say(f"round {round_no}/{self.max_rounds}: {len(playing)} legs")
        recs = await self._wave(round_wave_id(self.run_id, round_no),
                                [s.model for s in playing], prompts,
                                [s.history for s in playing], round_no=round_no,
                                anonymity=self.anonymity)
        readings: list[Reading | None] = []
        for seat, rec, peers in zip(playing, recs, shown, strict=True):
            seat.records.append(rec)
            if rec.status != COMPLETE or not (rec.answer or "").strip():
                seat.in_play = False
                self.dropped.append(f"leg {seat.n} ({seat.model.name}) failed in round "
                                    f"{round_no}")
                self.notice(f"leg {seat.n} ({seat.model.name}) failed in round {round_no} "
                            f"({rec.reason or rec.status}); its round-{round_no - 1} answer "
                            "stands and it leaves the deliberation")
                readings.append(None)
                continue
            seat.last_input = rec.usage.input_tokens
            readings.append(read_reply(rec.answer, {lb: p.answer for lb, p in peers.items()},
                                       seat.answer))
        await self._repair(round_no, playing, recs, shown, readings)
        # a vote names an answer as it was shown: the peer's round r-1 answer
        shown_digest = {s.n: s.digest for s in playing}
        entry, ballots = [], []
        for seat, rec, peers, reading in zip(playing, recs, shown, readings, strict=True):
            if reading is None:
                entry.append(self._leg_entry(seat, rec, None, None, changed=False))
                continue
            before = seat.digest
            if reading.problem is None:
                seat.answer = reading.answer or seat.answer
                seat.digest = rules.digest(seat.answer)
            seat.history = [*seat.history,
                            {"role": "user", "content": past_round(round_no, len(peers))},
                            {"role": "assistant", "content": rec.answer}]
            voted = peers.get(reading.vote) if reading.vote else None
            ballot = rules.Ballot(seat.n, seat.digest != before,
                                  shown_digest[voted.n] if voted is not None else None)
            ballots.append(ballot)
            entry.append(self._leg_entry(seat, rec, reading, voted, changed=ballot.changed,
                                         voted_digest=ballot.voted_for))
        self._ballots = ballots
        self._record_round(round_no, entry, ballots)
        return True

    def _redact(self, text: str) -> str:
        """An answer as another leg is shown it: every spelling of a participant's names
        taken out (folded: orchestrator/intake/anonymity.py), counted."""
        out, n = self.anonymity.redact(text)
        self.redacted += n
        return out

    async def _repair(self, round_no: int, playing: list[Seat], recs: list[LegRecord],
                      shown: list[dict[str, Seat]], readings: list[Reading | None]) -> None:
        """One repair prompt for each unreadable reply; still unreadable: the previous answer
        is kept, and said."""
        broken = [i for i, r in enumerate(readings) if r is not None and r.problem]
        if not broken:
            return
        again = await self._wave(f"{round_wave_id(self.run_id, round_no)}-repair",
                                 [playing[i].model for i in broken],
                                 [repair_prompt(recs[i].answer, readings[i].problem,
                                                list(shown[i])) for i in broken],
                                 round_no=round_no, anonymity=self.anonymity)
        for i, rec in zip(broken, again, strict=True):
            seat, first = playing[i], readings[i]
            seat.records.append(rec)
            if rec.status == COMPLETE and rec.answer:
                prose = payload(recs[i].answer)[1]
                readings[i] = take_repair(first, rec.answer,
                                          {lb: p.answer for lb, p in shown[i].items()},
                                          seat.answer, prose)
            if readings[i].problem:
                self.notice(f"leg {seat.n} ({seat.model.name})'s round-{round_no} reply could "
                            f"not be read ({first.problem}), even after a repair prompt; its "
                            f"round-{round_no - 1} answer is kept and it cast no vote")

    def _leg_entry(self, seat: Seat, rec: LegRecord, reading: Reading | None,
                   voted: Seat | None, *, changed: bool | None,
                   voted_digest: str | None = None) -> dict[str, Any]:
        return {
            "leg": seat.n, "model": seat.model.name, "leg_id": rec.leg_id,
            "status": rec.status, "answer_digest": seat.digest if seat.answer else None,
            "changed": changed,
            "decision": reading.decision if reading else None,
            "readable": None if reading is None else reading.problem is None,
            "problem": reading.problem if reading else None,
            "source": reading.source if reading else None,
            "vote": None if voted is None else {"label": reading.vote, "leg": voted.n,
                                                "answer_digest": voted_digest},
            "vote_problem": reading.vote_problem if reading else None,
            "reason": reading.reason if reading else None,
            "tokens": rec.usage.to_dict(), "cost_usd": rec.cost_usd,
        }

    def _record_round(self, round_no: int, legs: list[dict], ballots: list) -> None:
        for seat in self.seats:
            if seat.digest:
                self.answers.setdefault(seat.digest, seat.answer)
        ids = {round_wave_id(self.run_id, round_no), round_wave_id(self.run_id,
                                                                   f"{round_no}-repair")}
        recs = [r for r in self.records if r.wave_id in ids]
        known = [r.cost_usd for r in recs if r.cost_usd is not None]
        self.rounds.append({
            "round": round_no, "wave_id": round_wave_id(self.run_id, round_no),
            "peers": self.peers if round_no > 1 else 0, "legs": legs,
            "changed": sum(1 for b in ballots if b.changed),
            "requests": sum(r.requests for r in recs),
            "usage": sum((r.usage for r in recs), Usage()).to_dict(),
            "cost_usd": round(sum(known), 8), "cost_exact": len(known) == len(recs)})
        self._progress()

    def _progress(self) -> None:
        """``wave.json`` still ``running``, with the rounds decided so far: what `orch status`
        and `orch ui` show of a run still going (its live legs come from the round waves).
        A failed write is a notice: the run's own end writes the file again."""
        try:
            write_json_atomic(self.dir / "wave.json", {**self._begun,
                                                       "rounds": list(self.rounds)})
        except (OSError, ValueError, TypeError) as exc:
            self.notice(f"wave.json could not be written after round {len(self.rounds)} "
                        f"({type(exc).__name__}: {exc})")

    async def _chair(self) -> None:
        finals = [s for s in self.seats if s.answer]
        if not finals:
            self.notice("no leg answered: the chair was not called")
            return
        win = self.winner()
        parts = [CHAIR_BRIEF.format(rounds=len(self.rounds)), "", "## The briefing", "",
                 self.spec.briefing.strip(), "", f"## The final answers ({len(finals)})"]
        votes = self._votes_by_digest()
        for s in finals:
            got = votes.get(s.digest, 0)
            parts += ["", f"### {s.model.name} — {got} vote(s) in the last round"
                      + (" (the winner by votes)" if win and win["digest"] == s.digest else ""),
                      "", s.answer.strip()]
        recs = await self._wave(round_wave_id(self.run_id, "chair"), [self.spec.chair],
                                ["\n".join(parts) + "\n"], kind="chair")
        self.chair = recs[0]

    # -- the outcome -------------------------------------------------------------------
    def _votes(self) -> list[list[dict[str, Any]]]:
        out = []
        for r in self.rounds:
            out.append([{"voter": leg["leg"], "for_digest": leg["vote"]["answer_digest"],
                         "for_leg": leg["vote"]["leg"]} for leg in r["legs"] if leg["vote"]])
        return out

    def _votes_by_digest(self) -> dict[str, int]:
        last = [r for r in self._votes() if r]
        counts: dict[str, int] = {}
        for v in last[-1] if last else []:
            counts[v["for_digest"]] = counts.get(v["for_digest"], 0) + 1
        return counts

    def winner(self) -> dict[str, Any] | None:
        order = [s.digest for s in self.seats if s.digest]
        win = rules.winner(self._votes(), order)
        if win is None:
            return None
        holders = [s.n for s in self.seats if s.digest == win["digest"]]
        text = self.answers.get(win["digest"])
        return {**win, "legs": holders, "models": [self.seats[n - 1].model.name
                                                   for n in holders], "answer": text}

    def _final_records(self) -> list[LegRecord]:
        finals = []
        for seat in self.seats:
            if not seat.records:  # its first wave never ran (a wave_start refusal)
                finals.append(LegRecord(
                    leg_id=f"{round_wave_id(self.run_id, 1)}-{seat.n}", model=seat.model.name,
                    wave_id=round_wave_id(self.run_id, 1), provider=seat.model.provider,
                    status=ERROR, reason=self.failure or "not run"))
                continue
            rec = copy.deepcopy(seat.records[-1])
            rec.answer = seat.answer or rec.answer
            if seat.answer:
                rec.status, rec.reason = COMPLETE, None
            rec.usage = sum((r.usage for r in seat.records), Usage())
            costs = [r.cost_usd for r in seat.records]
            rec.cost_usd = None if None in costs else round(sum(costs), 10)
            rec.requests = sum(r.requests for r in seat.records)
            rec.extra = {**rec.extra, "leg_ids": [r.leg_id for r in seat.records],
                         "answer_digest": seat.digest}
            finals.append(rec)
        return finals

    def _anonymity(self) -> dict[str, Any]:
        """What the intake did to the later rounds' requests at the wire: the spellings it
        redacted, and the requests it stopped (the leg refused, nothing sent)."""
        return {"terms": len(self.terms), "redacted": self.redacted,
                "redacted_at_wire": sum(int(r.extra.get("anonymity_redacted") or 0)
                                        for r in self.records),
                "stopped": {r.leg_id: r.extra["anonymity_leaks"] for r in self.records
                            if r.extra.get("anonymity_leaks")}}

    def document(self) -> dict[str, Any]:
        from orchestrator.engine.wave import wave_status

        finals = self._final_records()
        status = wave_status(finals + ([self.chair] if self.chair else []))
        if self.signum is not None:
            status = "aborted"
        stop = self.stop or ({"rule": "interrupted", "after_round": len(self.rounds),
                              "also": []} if self.signum else None)
        doc = build_document(
            wave_id=self.run_id, status=status, legs=finals, chair=self.chair,
            runs_dir=self.spec.runs_dir, signum=self.signum,
            extra={"kind": "deliberation", "tag": self.spec.tag, "run_id": self.ledger_run,
                   "project_dir": self.spec.project_dir,
                   "models": [m.name for m in self.spec.models],
                   "chair_model": self.spec.chair.name if self.spec.chair else None,
                   "options": {**self.spec.options, "rounds": self.max_rounds,
                               "peers": self.peers},
                   "pid": os.getpid(), "notices": self.notices,
                   "budget_refusals": self.refusals,
                   "ledger_errors": self.ledger.errors if self.ledger else [],
                   "server": {"requests": self.server.sent,
                              "peak_in_flight": self.server.peak_in_flight},
                   "rounds": self.rounds, "stop": stop, "winner": self.winner(),
                   "votes": self._votes(), "anonymity": self._anonymity()},
            report=reporter(HookRunner(self.pm, config=self.config), self.notice))
        doc["degraded"] += [f"{d}: its previous answer stands" for d in self.dropped]
        if self.dropped and doc["exit_code"] == 0:
            doc["exit_code"] = 2
        if stop and stop["rule"] == rules.CEILING:
            doc["degraded"].append(f"the cost ceiling could not pay for round "
                                   f"{stop['after_round'] + 1}: it was not launched")
            if doc["exit_code"] == 0:
                doc["exit_code"] = 2
        return doc


def run_deliberation(spec: WaveSpec, pm, cfg, ledger, *, rounds: int, peers: int | None,
                     observe=None, say=None) -> dict[str, Any]:
    """Run one deliberation with signal handling; return its document."""
    run = Deliberation(spec, pm=pm, config=cfg, rounds=rounds, peers=peers, ledger=ledger,
                       observe=observe, say=say)

    async def main():
        return await run.run(handle_signals=True)

    return anyio.run(main)


def runs_path(doc: dict[str, Any]) -> Path:
    return Path(doc["runs_dir"]) / doc["wave_id"]
