"""Trials a killed bench paid for but never graded: settled by ``orch bench resume`` before
it sends anything, so no answer is bought twice.

A bench saves each trial to its results file once graded. A ``kill -9`` between a model's
billed answer and its grade leaves the money in the durable record (one row per leg,
``ledger/billed.py``) and the answer in the leg's ``metadata.json``, but no row in the
results, so the trial looks never run. The killed run's waves are found from the marker of
its results file (``running``: its wave prefix and the slots it ran). A billed model trial
whose answer was saved (``metadata.json``), or fanout trial whose final ``wave.json`` was,
is graded from it (no request); any other billed trial (a leg was still running, its folder
is gone, its check needs the trial folder, a council or a deliberation) becomes an excluded
``error`` row saying what was billed. So does a trial whose request was in flight at the
kill (the request journal, account/journal.py): it may have been billed, at most its claim,
so it is not sent again either. A later ``--retry-excluded`` sends those again.
Command trials are left alone: a command reports its own spend when it ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.account.journal import unsettled
from orchestrator.bakeoff import trial
from orchestrator.bakeoff.plan import Plan
from orchestrator.bakeoff.run import Slot, numbered
from orchestrator.bakeoff.trial import Ended, Outcome, keep_answer
from orchestrator.engine.record import COMPLETE, PENDING, RUNNING, LegRecord
from orchestrator.ledger.billed import Billed, billed_waves

MARKER = "running"  # the results file's mark of the process writing it (cli/bench_run.py)


def killed_run(doc: dict[str, Any], planned: int) -> tuple[str, list[int]] | None:
    """The wave prefix and slots of the run that left ``doc`` behind unfinished (its
    ``running`` marker); None when it finished, or an older orch's resume left it (its
    slots are not known)."""
    marker = doc.get(MARKER)
    if not isinstance(marker, dict):
        return None
    prefix = marker.get("wave_prefix")
    if prefix is None and doc.get("resumes"):
        return None
    slots = marker.get("trials")
    return str(prefix or ""), [int(n) for n in slots] if slots is not None \
        else list(range(1, planned + 1))


def settle(doc: dict[str, Any], plan: Plan, runs_dir: Path, guard,
           url: str | None = None) -> list[dict[str, Any]]:
    """The rows of the killed run's trials that were billed and are not in ``doc``: graded
    from the saved answer, or excluded saying what was billed. Sends nothing."""
    found = killed_run(doc, len(plan.tasks) * len(plan.contestants) * plan.trials)
    if found is None:
        return []
    prefix, ran = found
    have = {r["n"]: r for r in doc["trials"]}
    bench_id = doc["bench_id"]
    waves = billed_waves(f"{bench_id}-", url)
    flying = [e for e in unsettled(url, prefix=f"{bench_id}-") if not e.alive]
    if not waves and not flying:
        return []
    wanted = set(ran)
    slots = [s for s in numbered(plan) if s.n in wanted]
    index: dict[str, int] = {}
    out = []
    for slot in slots:
        c = slot.contestant
        if c.kind == "command":  # a command reports its own spend after it ends
            continue
        if c.kind == "model":
            j = plan.contestants.index(c) + 1
            index[c.name] = index.get(c.name, 0) + 1
            leg_id = f"{bench_id}-{prefix}{j}-{index[c.name]}"
            legs = [b for b in [waves.get(f"{bench_id}-{prefix}{j}", {}).get(leg_id)] if b]
            fly = [e for e in flying if e.leg_id == leg_id]
        else:
            wave = f"{bench_id}-{prefix}t{slot.n:04d}"
            legs = [b for w, held in waves.items() if w == wave or w.startswith(wave + "-")
                    for b in held.values()]
            fly = [e for e in flying if e.wave_id == wave or e.wave_id.startswith(wave + "-")]
            leg_id = None
        if not (legs or fly) or _graded_by(have.get(slot.n), leg_id,
                                           f"{bench_id}-{prefix}t{slot.n:04d}"):
            continue
        row = trial.base_row(slot.n, slot.task.id, c.name, c.kind, slot.trial)
        _bill(row, legs)
        if fly:  # a request may have been billed with no record of its answer: not resent
            _in_flight(row, fly, leg_id)
        elif leg_id is not None:
            _model(row, slot, leg_id, legs[0], runs_dir, guard)
        elif c.kind == "fanout" and not c.deliberates:
            _fanout(row, slot, f"{bench_id}-{prefix}t{slot.n:04d}", legs, runs_dir, guard)
        else:  # a council's or a deliberation's answer is made of several stages' files
            _unsaved(row, f"a {'deliberation' if c.deliberates else c.kind} trial is not "
                     "graded from saved answers")
        out.append(row)
    return out


def _graded_by(row: dict[str, Any] | None, leg_id: str | None, wave: str) -> bool:
    """Whether the results hold the killed run's own grade of this trial (a row an earlier
    run left, which the killed run was sending again, does not count)."""
    if row is None:
        return False
    if leg_id is not None:
        return row.get("leg_id") == leg_id
    return row.get("wave_id") in (wave, f"council-{wave}")


def _in_flight(row: dict[str, Any], fly: list, leg_id: str | None) -> None:
    """A trial with a request in flight at the kill: it may have been billed, and nothing
    says what it answered. Excluded, saying so and at most what it can have cost; only
    ``--retry-excluded`` sends it again."""
    from orchestrator.account.journal import summary, words

    found = summary(fly)
    billed = _billed_text(row) if row["input_tokens"] or row["output_tokens"] or \
        row["cost_usd"] else "nothing billed before the kill"
    reason = f"{billed}; {words(found)}: not sent again"
    row.update(status="error", reason=reason,
               in_flight_at_kill={"requests": found["requests"],
                                  "at_most_usd": found["at_most_usd"]})
    row["excluded"] = None  # the kill's reason stands over any earlier one
    trial.settle(row, Outcome(excluded=reason))  # never counted: the one place `passed` is written
    if leg_id is not None:
        row["leg_id"] = leg_id


def _bill(row: dict[str, Any], legs: list[Billed]) -> None:
    if not legs:
        row["cost_usd"], row["cost_source"] = 0.0, "none"
        return
    known = [b.cost_usd for b in legs]
    cost = None if any(x is None for x in known) else sum(known)
    row.update(input_tokens=sum(b.usage.input_tokens for b in legs),
               output_tokens=sum(b.usage.output_tokens for b in legs),
               cached_tokens=sum(b.usage.cached_tokens for b in legs),
               cost_usd=cost, cost_source=legs[0].cost_source if len(legs) == 1 else
               "ensemble" if cost is not None else "unknown",
               command=legs[0].model if len(legs) == 1 else None)
    row["tokens"] = row["input_tokens"] + row["output_tokens"]


def _billed_text(row: dict[str, Any]) -> str:
    cost = row["cost_usd"]
    return "billed " + ("(cost unknown)" if cost is None else f"${cost:.4f}") + \
        " before the kill"


def _unsaved(row: dict[str, Any], why: str) -> None:
    """No answer to grade: the trial is excluded, saying what it cost; never sent again."""
    reason = f"{_billed_text(row)}; {why}: not sent again"
    row.update(status="error", reason=reason)
    trial.settle(row, Outcome(excluded=reason))


def saved(runs_dir: Path, leg_id: str) -> LegRecord | None:
    """The leg as its ``metadata.json`` has it, or None (gone, unreadable)."""
    from orchestrator.store import read_json

    try:
        doc = read_json(runs_dir / leg_id / "metadata.json")
        return LegRecord.from_dict(doc) if isinstance(doc, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def _model(row: dict[str, Any], slot: Slot, leg_id: str, billed: Billed, runs_dir: Path,
           guard) -> None:
    """A model trial: graded from the answer its leg saved, as the run would have."""
    row["leg_id"] = leg_id
    if not billed.ended:
        return _unsaved(row, "answer not saved (the leg was still running)")
    record = saved(runs_dir, leg_id)
    if record is None:
        return _unsaved(row, f"answer not saved (its leg folder {leg_id} is gone)")
    if record.status in (RUNNING, PENDING):
        return _unsaved(row, "answer not saved (the leg's files stopped before its end)")
    if slot.task.verify:  # the check reads the files the model left: that folder is gone
        return _unsaved(row, "its check needs the trial folder, which is gone")
    answer = record.answer or ""
    ended = Ended(status=record.status, reason=record.reason,
                  answers=(answer,) if record.status == COMPLETE else (),
                  fields=dict(answer=keep_answer(answer), answer_chars=len(answer),
                              steps=record.steps, secs=round(record.duration_s or 0.0, 3)))
    trial.fill(row, ended)
    row["regraded"] = (f"graded after the kill from the answer saved in {leg_id} "
                       f"({_billed_text(row)}; not sent again)")
    trial.settle(row, trial.judge(slot.task, ended, None, guard))


def _fanout(row: dict[str, Any], slot: Slot, wave_id: str, legs: list[Billed],
            runs_dir: Path, guard) -> None:
    """A fanout trial: graded from its final ``wave.json`` (the chair's answer, or each
    member's until one passes), as the run would have."""
    from types import SimpleNamespace

    from orchestrator.bakeoff.ensemble import wave_ended
    from orchestrator.store import read_json

    if not all(b.ended for b in legs):
        return _unsaved(row, "answer not saved (a leg was still running)")
    try:
        doc = read_json(runs_dir / wave_id / "wave.json")
        records = [LegRecord.from_dict(d) for d in doc["legs"]]
        chair = LegRecord.from_dict(doc["chair"]) if doc.get("chair") else None
    except (OSError, ValueError, TypeError, KeyError):
        return _unsaved(row, f"answers not saved (its wave folder {wave_id} is gone)")
    if any(r.status in (RUNNING, PENDING) for r in [*records, *([chair] if chair else [])]):
        return _unsaved(row, "answers not saved (the wave's files stopped before its end)")
    if slot.task.verify:
        return _unsaved(row, "its check needs the trial folder, which is gone")
    wave = SimpleNamespace(  # the wave as ensemble.wave_ended reads a live one
        records=records, chair=SimpleNamespace(record=chair) if chair else None,
        spec=SimpleNamespace(chair=slot.contestant.chair), status=doc.get("status"),
        wave_id=wave_id, budget_refusals=doc.get("budget_refusals") or [])
    ended = wave_ended(wave, slot.contestant.aggregate)
    trial.fill(row, ended)
    _bill(row, legs)  # the money as the ledger has it, over what the files say
    row.update(command=wave_id, regraded=f"graded after the kill from the answers saved in "
                                         f"{wave_id} ({_billed_text(row)}; not sent again)")
    trial.settle(row, trial.judge(slot.task, ended, None, guard))
