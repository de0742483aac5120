"""What ``--retry-failed`` inherits: the legs to run again, the ceiling that is left, and the
answers its chair reads, planned from the whole family and from what was paid.

A wave and its retries (and their retries) are one *family*: their root is the wave that is
no retry. Each leg of the root is a *slot*; a retry's legs stand in for the slots they retry
(``options.retry_slots``). A slot completed in any member of the family, as its files say or
as the ledger and its outbox say (:mod:`orchestrator.engine.paid`, which a full disk or a
crash cannot leave stale), is never run again. The family shares the root's cost ceiling: a
retry gets what the whole family has not spent. The chair of a retry reads every complete
answer of the family; it is called again only when the retry brought a new complete answer,
or when the family's last chair failed for a reason other than the ceiling.
A retry plans and runs under :func:`orchestrator.engine.family_claim.claim_family`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.account import Account
from orchestrator.account.journal import at_kill, words
from orchestrator.engine.paid import Paid, paid_legs
from orchestrator.engine.record import COMPLETE, LegRecord
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.store import read_json

CEILING_REFUSALS = ("COST_CEILING", "BUDGET_CEILING")


@dataclass
class RetryPlan:
    wave: dict[str, Any]  # the document of the wave being retried
    models: list[str]  # the failed slots' models, in the root's order
    chair: bool  # whether the retry may call the chair
    slots: list[str] = field(default_factory=list)  # the root leg each model stands in for
    chair_model: str | None = None
    chair_only_if_new: bool = False  # call it only when a retried leg completes
    prior: list[LegRecord] = field(default_factory=list)  # complete answers the chair reads
    # per run ceiling (a plugin's option, e.g. max_cost): {"root", "ceiling", "spent", "left"}
    ceilings: dict[str, dict[str, Any]] = field(default_factory=dict)
    account: Account | None = None  # the family's, opened from the record: the retry's
    # what it was opened from (plain values): a process that runs the retry reopens it
    account_args: dict[str, Any] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)  # what the retry says before it spends
    root: str = ""
    family: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.models and not self.chair


def _parents(runs_dir: Path) -> dict[str, str | None]:
    """wave id -> the wave it retried, for every wave under ``runs_dir``."""
    parents = {}
    for path in runs_dir.glob("*/wave.json"):
        try:
            parents[path.parent.name] = read_json(path).get("retry_of")
        except Exception:
            continue
    return parents


def _root(wave_id: str, parents: dict[str, str | None]) -> str:
    seen = {wave_id}
    while parents.get(wave_id):
        wave_id = parents[wave_id]
        if wave_id in seen:  # a hand-edited loop: stop rather than spin
            break
        seen.add(wave_id)
    return wave_id


def _depth(wave_id: str, parents: dict[str, str | None]) -> int:
    depth, seen = 0, {wave_id}
    while parents.get(wave_id) and parents[wave_id] not in seen:
        wave_id = parents[wave_id]
        seen.add(wave_id)
        depth += 1
    return depth


def family_root(runs_dir: Path, wave_id: str) -> str:
    """The root of ``wave_id``'s family (the wave that is no retry)."""
    parents = _parents(runs_dir)
    return _root(wave_id, parents)


def _slot_legs(doc: dict[str, Any], root_doc: dict[str, Any]) -> list[tuple[str, dict]]:
    """(slot, leg) for each leg of ``doc``: the root's legs are their own slots; a retry's
    stand in for the slots it named, or (a retry made before slots were recorded) for the
    root's slots of the same model, in order."""
    if doc["wave_id"] == root_doc["wave_id"]:
        return [(leg["leg_id"], leg) for leg in doc["legs"]]
    named = (doc.get("options") or {}).get("retry_slots") or []
    free = [leg for leg in root_doc["legs"]]
    out = []
    for n, leg in enumerate(doc["legs"]):
        if n < len(named) and isinstance(named[n], str):
            out.append((named[n], leg))
            continue
        match = next((s for s in free if s["model"] == leg["model"]), None)
        if match is not None:
            free.remove(match)
            out.append((match["leg_id"], leg))
    return out


def plan_retry(runs_dir: Path, wave_id: str, *, chair_model: str | None = None,
               ceilings=()) -> RetryPlan:
    """``ceilings``: the run-ceiling options (orchestrator.options.Option) the retry did
    not set itself: each the family shares, what the whole family has not spent of it."""
    from orchestrator.engine.rebuild import load_wave

    doc = load_wave(runs_dir, wave_id)
    parents = _parents(runs_dir)
    parents.setdefault(wave_id, doc.get("retry_of"))
    root = _root(wave_id, parents)
    members = [w for w in parents if _root(w, parents) == root]
    docs = {w: doc if w == wave_id else load_wave(runs_dir, w) for w in members}
    # oldest first: ids sort by the second only, so by creation time (ms), then by depth
    family = sorted(members, key=lambda w: (str(docs[w].get("created_at") or ""),
                                            _depth(w, parents), w))
    busy = [w for w in family if docs[w]["status"] == "running"]
    if busy:
        raise OrchError(f"wave {busy[0]} is still running (pid {docs[busy[0]].get('pid')}); "
                        "wait for it to end, or stop it, before retrying its legs")
    paid = paid_legs(family)
    root_doc = docs[root]
    done: dict[str, LegRecord] = {}  # slot -> the latest complete answer for it
    for w in family:
        for slot, leg in _slot_legs(docs[w], root_doc):
            if leg["status"] == COMPLETE or paid.get(leg["leg_id"], Paid()).complete:
                done[slot] = LegRecord.from_dict(leg)
    todo = [leg for leg in root_doc["legs"] if leg["leg_id"] not in done]
    chairs = [docs[w]["chair"] for w in family if docs[w].get("chair")]
    chair_name = chair_model or next((docs[w].get("chair_model") for w in reversed(family)
                                      if docs[w].get("chair_model")), None)
    last = chairs[-1] if chairs else None
    owed = bool(chair_name and done) and (last is None or (
        last["status"] != COMPLETE and not _ceiling_refused(last)))
    plan = RetryPlan(wave=doc, models=[leg["model"] for leg in todo],
                     slots=[leg["leg_id"] for leg in todo], chair_model=chair_name,
                     chair=bool(chair_name) and (bool(todo) or owed),
                     chair_only_if_new=not owed, root=root, family=family,
                     prior=[done[leg["leg_id"]] for leg in root_doc["legs"]
                            if leg["leg_id"] in done])
    plan.account_args = _family_account_args(root, family, docs, ceilings)
    plan.account = open_family_account(plan.account_args)
    flying = at_kill(waves=family)  # sent before a kill, never recorded: may be billed
    if flying["requests"]:
        slot_of = {leg["leg_id"]: slot for w in family
                   for slot, leg in _slot_legs(docs[w], root_doc)}
        again = sorted(e["leg_id"] for e in flying["legs"]
                       if slot_of.get(e["leg_id"]) in set(plan.slots))
        plan.notices.append(f"{words(flying)} ({', '.join(e['leg_id'] for e in flying['legs'])})"
                            + (f"; their slots are sent again: {', '.join(again)}"
                               if again else ""))
    for option in ceilings:
        family_ceiling = _family_ceiling(root, docs, plan.account, option)
        if family_ceiling is not None:
            plan.ceilings[option.key] = family_ceiling
    return plan


def _ceiling_refused(chair: dict[str, Any]) -> bool:
    return chair["status"] == "refused" and str(chair.get("reason") or "").startswith(
        CEILING_REFUSALS)


def _family_account_args(root: str, family: list[str], docs: dict[str, dict[str, Any]],
                         ceilings) -> dict[str, Any]:
    """What the family's one account is opened from: the root's ceilings, the members, and
    each leg's cost (its bound where a cost was not read) as their files say."""
    whole = {o.key: (docs[root].get("options") or {}).get(o.key) for o in ceilings}
    whole = {o.key: _recorded(root, o, whole[o.key]) for o in ceilings
             if whole[o.key] is not None}
    files: dict[str, float] = {}
    if whole:
        for doc in docs.values():
            for leg in [*doc["legs"], *([doc["chair"]] if doc.get("chair") else [])]:
                bound = leg.get("cost_bound_usd")
                files[leg["leg_id"]] = float(bound if bound is not None
                                             else leg.get("cost_usd") or 0.0)
    return {"root": root, "ceilings": whole, "waves": list(family), "files": files}


def open_family_account(args: dict[str, Any]) -> Account:
    """The family's one account: what the record holds for every member (the ledger's and
    the outbox's rows, each leg's bound where a cost was not read, the requests a killed
    member left in flight), or its own files where they know more; its ceilings are the
    root's. Without a ceiling nothing is read (nothing would be checked against it). Opened
    where the retry is planned, and again where it runs (the daemon: app/start.py)."""
    if not args["ceilings"]:
        return Account(run_id=args["root"])
    account = Account.open(None, dict(args["ceilings"]), waves=list(args["waves"]),
                           files=dict(args["files"]))
    account.run_id = args["root"]
    return account


def _family_ceiling(root: str, docs: dict[str, dict[str, Any]], account: Account,
                    option) -> dict[str, Any] | None:
    """The root's ceiling (``option``'s) and what the whole family holds (its account), or
    None when it had none."""
    ceiling = (docs[root].get("options") or {}).get(option.key)
    if ceiling is None:
        return None
    spent = account.committed()
    left = round(float(ceiling) - spent, 10)
    if left <= 0:
        raise OrchError(f"wave {root} and its retries spent ${spent:.4f} of their "
                        f"${float(ceiling):g} ceiling: nothing is left for a retry; pass "
                        f"{option.flag} {option.metavar or 'USD'} to set a ceiling for this "
                        "retry alone")
    return {"root": root, "ceiling": float(ceiling), "spent": round(spent, 10), "left": left}


def _recorded(root: str, option, value: Any) -> Any:
    """A ceiling as the root's ``wave.json`` records it, through the one check of a flag's
    value (orchestrator/option_values.py): a hand-edited ``"max_cost": "abc"`` is one line
    naming the wave and the fix, not an internal error."""
    from orchestrator.option_values import BadValue, checked

    try:
        return checked(option, value)
    except BadValue as exc:
        raise UsageProblem(f"{option.flag} kept from wave {root}: {exc.problem}; pass "
                           f"{option.flag} to set this retry's own, or fix that wave's "
                           "wave.json") from None
