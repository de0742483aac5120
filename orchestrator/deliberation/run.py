"""A deliberation: ``orch fanout --rounds N``. Round 1 is a plain fanout; in each later round
every leg still in play reads its peers' previous answers (anonymised), revises, keeps or
adopts, and votes for the best other answer or declines. Each round is one wave on one shared server,
every request a ledger row under the run id, the round in the wave id (docs/deliberation.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from orchestrator import jobscope, run_ceiling
from orchestrator.account import Account
from orchestrator.chair.marks import marks_of
from orchestrator.chair.synthesis import deliberation_packet
from orchestrator.config import Config
from orchestrator.council.anonymity import identifying_terms
from orchestrator.council.bundle import leaks, new_nonce
from orchestrator.deliberation import outcome, rules
from orchestrator.deliberation.cost import round_bound
from orchestrator.deliberation.outcome import Seat
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
from orchestrator.engine.record import COMPLETE, LegRecord
from orchestrator.engine.wave import Wave, WaveSpec, new_wave_id
from orchestrator.engine.wave_document import build_document, outcomes, wave_status
from orchestrator.events import NoSink, RoundEnded, RoundStarted, Sink
from orchestrator.intake import Anonymity
from orchestrator.ledger.schema import ROUND_INFIX
from orchestrator.models.addressing import ResolvedModel
from orchestrator.models.server import Server
from orchestrator.plugin_host.hooks import HookRunner
from orchestrator.request import Usage
from orchestrator.security.secrets import scrub
from orchestrator.store import write_json_atomic
from orchestrator.votes import tally
from orchestrator.votes.answer import digest

# the keys each round's wave options carry: which deliberation, which round (orchestrator.modes
# reads them for plugins)
RUN_KEY, ROUND_KEY = "deliberation", "round"


def round_wave_id(run_id: str, round_no: int | str) -> str:
    """Where a round's number lives in the ledger: its wave id (docs/spend.md); the chair's
    wave is round ``chair``, a round's repair prompts ``<N>-repair``."""
    return f"{run_id}{ROUND_INFIX}{round_no}"


class Deliberation:
    def __init__(self, spec: WaveSpec, *, pm, config: Config, rounds: int, peers: int | None,
                 ledger: LedgerSink | None = None, observe=None, events: Sink | None = None,
                 server: Server | None = None, account: Account | None = None) -> None:
        """``server`` and ``account``: a host running several deliberations under one rate
        gate and one cost ceiling (a bench, bakeoff/deliberating.py) gives its server and its
        run's account; alone, a deliberation has its own server and its own account (a new
        run id: the record holds nothing for it yet)."""
        self.spec, self.pm, self.config = spec, pm, config
        self.max_rounds, self.ledger, self.observe = rounds, ledger, observe
        self.events = events or NoSink()  # rounds as they start and end (orchestrator.events)
        self.run_id = spec.wave_id or new_wave_id()
        self.ledger_run = spec.run_id or self.run_id  # a bench's trial: the bench's id
        self.dir = spec.runs_dir / self.run_id
        # one gate and counters for all rounds (a host's: for all its trials too)
        self.server = server or Server(timeout_s=spec.timeout_s)
        self.ceilings = run_ceiling.given(spec.options, pm)  # {key: dollars}, e.g. max_cost
        self.account = account if account is not None else \
            Account(run_id=self.run_id, ceilings=self.ceilings)
        self.seats = [Seat(n, m) for n, m in enumerate(spec.models, start=1)]
        n = len(self.seats)
        self.peers = rules.default_peers(n) if peers is None else max(1, min(peers, n - 1))
        self.nonce = new_nonce()
        terms = identifying_terms(spec.models + ([spec.chair] if spec.chair else []))
        scaffold = round_prompt(round_no=2, max_rounds=3, own="", peers={"Answer A": ""},
                                nonce="0") + INSTRUCTION
        scaffold += past_round(2, 1) + "".join(  # the words that point at its own answer
            round_prompt(round_no=3, max_rounds=3, own=None, own_round=k, same=2,
                         peers={"Answer A": ""}, nonce="0") for k in (1, 2))
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
        self.cast: list[list[tally.Vote]] = []  # per round (round 1: none), as cast
        self._last: dict[str, Any] = {"changed": [], "replies": 0, "read": 0}
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
        options = {**self.spec.options, RUN_KEY: self.run_id, ROUND_KEY: round_no}
        options.update({key: self.left(key) for key in self.ceilings})  # what the run has left
        spec = WaveSpec(models=models, briefing=self.spec.briefing, briefings=briefings,
                        histories=histories, runs_dir=self.dir / "rounds",
                        timeout_s=self.spec.timeout_s, max_steps=self.spec.max_steps,
                        kind=kind or self.spec.kind, run_id=self.ledger_run, wave_id=wave_id,
                        tag=self.spec.tag,
                        project_dir=self.spec.project_dir, workspace=self.spec.workspace,
                        options=options, later=[self.spec.chair] if self.spec.chair else [],
                        anonymity=anonymity)
        wave = Wave(spec, pm=self.pm, config=self.config, ledger=self.ledger, account=self.account,
                    observe=self.observe, server=self.server)
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
        """What its rounds hold: each leg's bound where a cost was not read, else its cost."""
        return sum(r.cost_bound_usd if r.cost_bound_usd is not None else r.cost_usd or 0.0
                   for r in self.records)

    def left(self, key: str | None = None) -> float:
        """What the ceiling (``key``; else the tightest) has left: of the run's own, or of
        the host's shared one."""
        lefts = [self.account.left(k) for k in ([key] if key else self.ceilings)]
        return min(run_ceiling.left(self.ceilings[k], self.spent()) if v is None else v
                   for k, v in zip([key] if key else self.ceilings, lefts, strict=True))

    async def _rounds(self) -> None:
        self.events.emit(RoundStarted(1, self.max_rounds, len(self.seats)))
        recs = await self._wave(round_wave_id(self.run_id, 1), [s.model for s in self.seats],
                                [self.spec.briefing] * len(self.seats), round_no=1)
        entry = []
        for seat, rec in zip(self.seats, recs, strict=True):
            seat.records.append(rec)
            seat.last_input = rec.usage.input_tokens
            if rec.status == COMPLETE and (rec.answer or "").strip():
                seat.answer, seat.in_play = rec.answer, True
                seat.digest = digest(seat.answer)
                seat.answer_round, seat.marks = 1, marks_of(rec)
                seat.history = [{"role": "user", "content": self.spec.briefing},
                                {"role": "assistant", "content": rec.answer}]
            entry.append(outcome.leg_entry(seat, rec, None, changed=None))
        self.cast.append([])
        self._record_round(1, entry, 0)
        round_no = 1
        while self.signum is None:
            held = rules.stop_rules(round_no=round_no, max_rounds=self.max_rounds,
                                    holds=[s.digest for s in self.seats if s.in_play],
                                    **self._last)
            if held:
                self.stop = {"rule": held[0], "after_round": round_no, "also": held[1:]}
                return
            round_no += 1
            if not await self._round(round_no):
                return

    def _offer(self, seat: Seat, peers: list[Seat], round_no: int) -> dict[str, Any]:
        """What ``seat`` is shown this round: each distinct answer of the ``peers`` it reads
        once, under a label dealt for it alone, never an answer identical to its own."""
        groups, same = rules.votable(seat.digest, [(p.n, p.digest) for p in peers])
        labels = rules.deal_labels(list(range(len(groups))), self.run_id, round_no, seat.n)
        by_n = {p.n: p for p in peers}
        offered = {}
        for label, k in labels.items():
            d, legs = groups[k]
            holder = by_n[legs[0]]
            offered[label] = {"digest": d, "legs": legs, "text": holder.answer,
                              "marks": list(holder.marks)}
        return {"labels": offered, "same": same}

    async def _round(self, round_no: int) -> bool:
        """Round ``round_no``; False when the ceiling could not pay for it (not launched)."""
        playing = [s for s in self.seats if s.in_play]
        graph = rules.peer_graph(len(playing), self.peers, self.run_id, round_no)
        asked, prompts, shown, idle = [], [], [], []
        for i, seat in enumerate(playing):
            offer = self._offer(seat, [playing[j] for j in graph[i]], round_no)
            if not offer["labels"]:  # every answer it reads is its own: nothing to weigh
                idle.append(seat)
                continue
            # a key a leg echoed never reaches another model (scrub), nor a name (redact)
            prompt = round_prompt(
                round_no=round_no, max_rounds=self.max_rounds, nonce=self.nonce,
                own=None if seat.answer_round else self._redact(scrub(seat.answer)),
                own_round=seat.answer_round, same=offer["same"],
                peers={lb: self._redact(scrub(o["text"]))
                       for lb, o in offer["labels"].items()})
            found = leaks(prompt, self.terms)
            if found:  # redaction and the scan share one pattern: a bug, not bad luck
                raise RuntimeError(f"a round-{round_no} prompt still names {found}")
            asked.append(seat)
            prompts.append(prompt)
            shown.append(offer["labels"])
        if self.ceilings and asked:
            bound = round_bound(asked, prompts, self.spec.options, self.config)
            if bound is not None and bound > self.left():
                self.notice(f"round {round_no} was not launched: its worst case "
                            f"${bound:.4f} is more than the ${self.left():.4f} the cost "
                            "ceiling has left")
                self.stop = {"rule": rules.CEILING, "after_round": round_no - 1, "also": [],
                             "bound_usd": round(bound, 8), "left_usd": self.left()}
                return False
        self.events.emit(RoundStarted(round_no, self.max_rounds, len(asked), len(idle)))
        recs = await self._wave(round_wave_id(self.run_id, round_no),
                                [s.model for s in asked], prompts,
                                [s.history for s in asked], round_no=round_no,
                                anonymity=self.anonymity) if asked else []
        readings: list[Reading | None] = []
        for seat, rec, offer in zip(asked, recs, shown, strict=True):
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
            readings.append(read_reply(rec.answer, {lb: o["text"] for lb, o in offer.items()},
                                       seat.answer))
        await self._repair(round_no, asked, recs, shown, readings)
        changed, cast, pending = [], [], []
        for seat, rec, offer, reading in zip(asked, recs, shown, readings, strict=True):
            if reading is None:
                pending.append((seat, rec, None, None, False))
                continue
            before = seat.digest
            if reading.problem is None:
                self._take(seat, rec, reading, offer, round_no)
            seat.history = [*seat.history,
                            {"role": "user", "content": past_round(round_no, len(offer))},
                            {"role": "assistant", "content": rec.answer}]
            vote = None
            if reading.vote:
                o = offer[reading.vote]
                vote = tally.Vote(seat.n, o["digest"], tuple(o["legs"]))
            elif reading.declined:  # no other answer beats its own: a ballot, not a problem
                vote = tally.Vote(seat.n, None)
            if vote is not None:
                cast.append(vote)
            changed.append(seat.digest != before)
            pending.append((seat, rec, reading, vote, seat.digest != before))
        # votes count what the legs hold now, at the end of this round (votes/tally.py)
        now = self.holdings()
        entry = [outcome.leg_entry(seat, rec, reading, changed=ch, vote=vote, now=now)
                 for seat, rec, reading, vote, ch in pending]
        for seat in idle:
            changed.append(False)
            entry.append({**outcome.leg_entry(seat, None, None, changed=False),
                          "sat_out": "every answer it reads is its own"})
        entry.sort(key=lambda e: e["leg"])
        self.cast.append(cast)
        replies = [r for r in readings if r is not None]
        self._last = {"changed": changed, "replies": len(replies),
                      "read": sum(1 for r in replies if r.problem is None)}
        self._record_round(round_no, entry, sum(changed))
        return True

    def _take(self, seat: Seat, rec: LegRecord, reading: Reading, offer: dict[str, Any],
              round_no: int) -> None:
        """A readable reply's decision: the answer the leg holds now, where its conversation
        holds that answer (sent once a round) and the answer's marks for the chair."""
        if reading.decision == "revise":
            seat.answer, seat.answer_round, seat.marks = reading.answer, round_no, \
                marks_of(rec)
        elif reading.decision == "adopt":
            o = offer[reading.adopt]
            seat.answer, seat.answer_round, seat.marks = o["text"], None, list(o["marks"])
        seat.digest = digest(seat.answer)

    def _redact(self, text: str) -> str:
        """An answer as another leg is shown it: every spelling of a participant's names
        taken out (folded: orchestrator/intake/anonymity.py), counted."""
        out, n = self.anonymity.redact(text)
        self.redacted += n
        return out

    async def _repair(self, round_no: int, asked: list[Seat], recs: list[LegRecord],
                      shown: list[dict[str, Any]], readings: list[Reading | None]) -> None:
        """One repair prompt for each unreadable reply; still unreadable: the previous answer
        is kept, and said."""
        broken = [i for i, r in enumerate(readings) if r is not None and r.problem]
        if not broken:
            return
        again = await self._wave(f"{round_wave_id(self.run_id, round_no)}-repair",
                                 [asked[i].model for i in broken],
                                 [repair_prompt(recs[i].answer, readings[i].problem,
                                                list(shown[i])) for i in broken],
                                 round_no=round_no, anonymity=self.anonymity)
        for i, rec in zip(broken, again, strict=True):
            seat, first = asked[i], readings[i]
            seat.records.append(rec)
            if rec.status == COMPLETE and rec.answer:
                prose = payload(recs[i].answer)[1]
                readings[i] = take_repair(first, rec.answer,
                                          {lb: o["text"] for lb, o in shown[i].items()},
                                          seat.answer, prose)
            if readings[i].problem:
                self.notice(f"leg {seat.n} ({seat.model.name})'s round-{round_no} reply could "
                            f"not be read ({first.problem}), even after a repair prompt; its "
                            f"round-{round_no - 1} answer is kept and it cast no vote")

    def _record_round(self, round_no: int, legs: list[dict], changed: int) -> None:
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
            "changed": changed,
            "requests": sum(r.requests for r in recs),
            "usage": sum((r.usage for r in recs), Usage()).to_dict(),
            "cost_usd": round(sum(known), 8), "cost_exact": len(known) == len(recs)})
        self.events.emit(RoundEnded(round_no, self.rounds[-1]["changed"],
                                    self.rounds[-1]["cost_usd"]))
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
        finals = self.final_answers()
        if not finals:
            self.notice("no leg answered: the chair was not called")
            return
        win = self.winner()
        standing = outcome.standing(self.cast, self.holdings())
        brief = deliberation_packet(self.spec.briefing, len(self.rounds), [
            {"models": f["models"], "text": f["answer"], "marks": f["marks"],
             **standing.get(f["digest"], {"votes": 0, "support": 0}),
             "winner": bool(win and win["digest"] == f["digest"])} for f in finals])
        recs = await self._wave(round_wave_id(self.run_id, "chair"), [self.spec.chair],
                                [brief], kind="chair")
        self.chair = recs[0]

    # -- the outcome (deliberation/outcome.py) ------------------------------------------
    def holdings(self) -> dict[int, str]:
        return outcome.holdings(self.seats)

    def final_answers(self) -> list[dict[str, Any]]:
        return outcome.final_answers(self.seats)

    def winner(self) -> dict[str, Any] | None:
        return outcome.winner(self.seats, self.cast)

    def _anonymity(self) -> dict[str, Any]:
        """What the intake did to the later rounds' requests at the wire: the spellings it
        redacted, and the requests it stopped (the leg refused, nothing sent)."""
        return {"terms": len(self.terms), "redacted": self.redacted,
                "redacted_at_wire": sum(int(r.extra.get("anonymity_redacted") or 0)
                                        for r in self.records),
                "stopped": {r.leg_id: r.extra["anonymity_leaks"] for r in self.records
                            if r.extra.get("anonymity_leaks")}}

    def document(self) -> dict[str, Any]:
        finals = outcome.final_records(self.seats, round_wave_id(self.run_id, 1), self.failure)
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
                   "answers": [{k: f[k] for k in ("digest", "legs", "models")}
                               for f in self.final_answers()],
                   "votes": outcome.votes(self.cast, self.holdings()),
                   "anonymity": self._anonymity(),
                   **outcomes(self.spec.options, finals, None)},
            report=reporter(HookRunner(self.pm, config=self.config), self.notice))
        degraded = [f"{d}: its previous answer stands" for d in self.dropped]
        if stop and stop["rule"] == rules.CEILING:
            degraded.append(f"the cost ceiling could not pay for round "
                            f"{stop['after_round'] + 1}: it was not launched")
        unread = rules.votes_unread([r["legs"] for r in self.rounds[1:]])
        if unread:
            degraded.append(unread)
        doc["degraded"] += degraded
        if degraded and doc["exit_code"] == 0:
            doc["exit_code"] = 2
        return doc


def runs_path(doc: dict[str, Any]) -> Path:
    return Path(doc["runs_dir"]) / doc["wave_id"]
