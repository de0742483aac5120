"""The tally: peer votes → tiers, peer rankings → street-cred. Pure and deterministic, no model.

Input is plain data keyed by seat (the seat's model name):

- ``findings``: ``{"id", "seat", "severity", "claim", "location"}`` — run-wide ids;
- ``votes``: ``{"judge", "finding", "vote": agree|dispute|neutral, "reason"}``;
- ``rankings``: ``{judge: [seat, ...]}``, best first;
- ``judges``: the seats that returned a judgement (default: every seat).

Similar findings from different seats (grouping.py) form one group and are tiered once. A
group's **eligible judges** are the judges that raised none of its findings; a judge that did
not vote on it counts as neutral. Tiers, over ``n`` eligible judges:

- ``disputed``: ``2·dispute > n``;
- ``confirmed``: ``2·agree > n`` and no dispute;
- ``contested``: at least one agree and one dispute, and not disputed;
- ``singleton``: everything else.

Street-cred is a seat's mean normalised rank from its peers, 0..1 (1 = ranked first by every
peer), so councils of any size compare.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from orchestrator.council.grouping import group_findings, natural_key

CONCURRENCE_LINE = "Tiers report peer concurrence, never verification."
TIERS = ("confirmed", "contested", "singleton", "disputed")
SEVERITIES = ("blocker", "major", "minor", "nit")
VOTES = ("agree", "dispute", "neutral")

__all__ = ["CONCURRENCE_LINE", "SEVERITIES", "TIERS", "VOTES", "dissent", "natural_key", "stance",
           "street_cred", "tally", "tier"]


def stance(votes: list[str]) -> str:
    """One judge's stance on a group from its votes on the group's members."""
    agree, dispute = "agree" in votes, "dispute" in votes
    if agree and not dispute:
        return "agree"
    if dispute and not agree:
        return "dispute"
    return "neutral"


def tier(agree: int, dispute: int, eligible: int) -> str:
    """The tier of a group with ``eligible`` judges, of whom ``agree`` agree and ``dispute``
    dispute (everyone else, voting neutral or not at all, is neutral)."""
    if 2 * dispute > eligible:
        return "disputed"
    if 2 * agree > eligible and not dispute:
        return "confirmed"
    if agree and dispute:
        return "contested"
    return "singleton"


def street_cred(seats: list[str], rankings: dict[str, list[str]]) -> tuple[dict, int, int]:
    """Each seat's mean normalised rank from its peers: a judge that ranked ``k`` reviews
    gives its p-th ``(k - p) / (k - 1)`` — 1 first, 0 last. A ranking of one review says
    nothing (it is first by default) and gives no score. Self-ranks are left out.
    Returns (per seat {street_cred, ranks, scores}, self_ranks_excluded, unknown_excluded)."""
    ranks: dict[str, list[int]] = {s: [] for s in seats}
    scores: dict[str, list[float]] = {s: [] for s in seats}
    self_ranks = unknown = 0
    for judge in sorted(rankings):
        order: list[str] = []
        for seat in rankings[judge]:
            if seat == judge:
                self_ranks += 1
            elif seat not in ranks or seat in order:
                unknown += 1
            else:
                order.append(seat)
        k = len(order)
        for position, seat in enumerate(order, start=1):
            ranks[seat].append(position)
            if k > 1:
                scores[seat].append((k - position) / (k - 1))
    out = {s: {"street_cred": round(sum(scores[s]) / len(scores[s]), 3) if scores[s] else None,
               "ranks": ranks[s], "scores": [round(x, 3) for x in scores[s]]}
           for s in seats}
    return out, self_ranks, unknown


def _reason(vote: str, reason: str) -> str:
    """A reason without a leading restatement of its vote ("agree: race" → "race")."""
    text = " ".join((reason or "").split())
    words = {vote, *{"agree": ("agreed", "agrees", "yes"), "dispute": (
        "disputed", "disputes", "disagree")}.get(vote, ())}
    m = re.match(r"^\W*(\w+)\W*[:,.;–—-]\s*(.*)$", text)
    if m and m.group(1).lower() in words and m.group(2):
        return m.group(2)
    return "" if text.lower().strip(" .:") in words else text


def dissent(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every agree/dispute on a contested or disputed group, each said once: ``{group,
    tier, finding, judge, vote, reason}`` with the reason not repeating the vote."""
    out = []
    for g in result["groups"]:
        if g["tier"] not in ("contested", "disputed"):
            continue
        for v in g["votes"]:
            if v["vote"] != "neutral":
                out.append({"group": g["id"], "tier": g["tier"], "finding": v["finding"],
                            "judge": v["judge"], "vote": v["vote"],
                            "reason": _reason(v["vote"], v["reason"])})
    return out


def _severity_rank(severity: str | None) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def tally(seats: list[str], findings: list[dict[str, Any]], votes: list[dict[str, Any]],
          rankings: dict[str, list[str]], judges: list[str] | None = None) -> dict[str, Any]:
    """The tally document (``tally.json``); the same input always gives the same output.
    ``judges``: the seats whose judgement came back (default: every seat)."""
    judges = sorted(set(seats if judges is None else judges))
    author = {f["id"]: f["seat"] for f in findings}
    by_judge: dict[tuple[str, str], dict[str, Any]] = {}
    self_votes = unknown_votes = 0
    for v in votes:
        fid, judge, vote = v.get("finding"), v.get("judge"), v.get("vote")
        if fid not in author or vote not in VOTES or judge not in judges:
            unknown_votes += 1
        elif author[fid] == judge:
            self_votes += 1
        else:
            by_judge[(judge, fid)] = v  # a repeated vote: the last one stands

    on_finding: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (_, fid), v in by_judge.items():
        on_finding[fid].append(v)

    groups_out, finding_group = [], {}
    for n, members in enumerate(group_findings(findings), start=1):
        gid = f"G{n}"
        ids = [m["id"] for m in members]
        raisers = {m["seat"] for m in members}
        eligible = [j for j in judges if j not in raisers]
        cast: dict[str, list[str]] = defaultdict(list)
        detail = []
        for v in sorted((v for fid in ids for v in on_finding[fid]),
                        key=lambda v: (v["judge"], natural_key(v["finding"]))):
            if v["judge"] not in eligible:  # a co-author voting on its group: not counted
                self_votes += 1
                continue
            cast[v["judge"]].append(v["vote"])
            detail.append({"judge": v["judge"], "finding": v["finding"], "vote": v["vote"],
                           "reason": v.get("reason") or ""})
        stances = {j: stance(cast[j]) if j in cast else "neutral" for j in eligible}
        counts = {k: sum(1 for s in stances.values() if s == k) for k in VOTES}
        counts["judges"] = len(eligible)
        counts["missing"] = sum(1 for j in eligible if j not in cast)
        counts["raised_by"] = len(raisers)
        lead = members[0]
        severity = min((m.get("severity") for m in members), key=_severity_rank)
        groups_out.append({
            "id": gid, "tier": tier(counts["agree"], counts["dispute"], len(eligible)),
            "severity": severity, "location": lead.get("location", ""),
            "claim": lead.get("claim", ""),
            "claims": [{"finding": m["id"], "seat": m["seat"], "severity": m.get("severity"),
                        "location": m.get("location", ""), "claim": m.get("claim", "")}
                       for m in members],
            "findings": ids, "seats": [m["seat"] for m in members], "counts": counts,
            "stances": stances, "votes": detail,
        })
        for fid in ids:
            finding_group[fid] = gid

    groups_out.sort(key=lambda g: (TIERS.index(g["tier"]), _severity_rank(g["severity"]),
                                   natural_key(g["findings"][0])))
    tier_of = {g["id"]: g["tier"] for g in groups_out}
    creds, self_ranks, unknown_ranks = street_cred(seats, rankings)
    seats_out = {}
    by_seat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in findings:
        by_seat[f["seat"]].append(f)
    for seat in seats:
        own = by_seat[seat]
        seats_out[seat] = {
            **creds[seat],
            "findings": {s: sum(1 for f in own if f.get("severity") == s) for s in SEVERITIES},
            "raised": len(own),
            "confirmed": sum(1 for f in own if tier_of[finding_group[f["id"]]] == "confirmed"),
        }
    return {
        "line": CONCURRENCE_LINE,
        "tiers": {t: sum(1 for g in groups_out if g["tier"] == t) for t in TIERS},
        "groups": groups_out,
        "findings": {f["id"]: {"group": finding_group[f["id"]], "seat": f["seat"],
                               "tier": tier_of[finding_group[f["id"]]]}
                     for f in sorted(findings, key=lambda f: natural_key(f["id"]))},
        "seats": seats_out,
        "judges": judges,
        "excluded": {"self_votes": self_votes, "unknown_votes": unknown_votes,
                     "self_ranks": self_ranks, "unknown_ranks": unknown_ranks},
    }
