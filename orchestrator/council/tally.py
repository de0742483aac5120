"""The tally: peer votes → tiers, peer rankings → street-cred. Pure and deterministic, no model.

Input is plain data keyed by seat (the seat's model name):

- ``findings``: ``{"id", "seat", "severity", "claim", "location"}`` — run-wide ids;
- ``votes``: ``{"judge", "finding", "vote": agree|dispute|neutral, "reason"}``;
- ``rankings``: ``{judge: [seat, ...]}``, best first.

Similar findings from different seats (same location, overlapping claim) form one group and
are tiered once, so an issue two seats both raised is not counted twice. A judge has one
stance per group. A judge's vote on its own finding, and its rank of its own review, are
never counted. A neutral vote abstains: majorities are over the judges who took a side.

Tiers (first that applies): ``disputed`` — more than half of the side-taking judges dispute;
``contested`` — some agree and some dispute; ``confirmed`` — some agree, none dispute;
``singleton`` — no judge agreed (nobody took a side, or nobody voted).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

CONCURRENCE_LINE = "Tiers report peer concurrence, never verification."
TIERS = ("confirmed", "contested", "singleton", "disputed")
SEVERITIES = ("blocker", "major", "minor", "nit")
VOTES = ("agree", "dispute", "neutral")
CLAIM_OVERLAP = 0.5  # shared words / words of the shorter claim

_STOPWORDS = frozenset(
    "the and for with that this from are was were not but has have had its into when then "
    "than can may might should would could will does did any all out too very more most "
    "over under there their them they which what who how why where been being also only".split())


def natural_key(finding_id: str) -> tuple:
    """F2 before F10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", finding_id))


def claim_words(claim: str) -> frozenset[str]:
    words = re.findall(r"[a-z0-9_]+", (claim or "").lower())
    return frozenset(w for w in words if len(w) >= 3 and w not in _STOPWORDS)


def norm_location(text: str) -> str:
    return " ".join((text or "").lower().split()).removeprefix("./")


def same_location(a: str, b: str) -> bool:
    return bool(norm_location(a)) and norm_location(a) == norm_location(b)


def similar(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same location and overlapping claim: two seats describing one issue."""
    if not same_location(a.get("location", ""), b.get("location", "")):
        return False
    wa, wb = claim_words(a.get("claim", "")), claim_words(b.get("claim", ""))
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= CLAIM_OVERLAP


def group_findings(findings: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Greedy in id order: a finding joins the first group it resembles that holds nothing
    from its own seat, else starts a group."""
    groups: list[list[dict[str, Any]]] = []
    by_location: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for f in sorted(findings, key=lambda f: natural_key(f["id"])):
        place = norm_location(f.get("location", ""))
        for group in by_location.get(place, []) if place else []:  # only same-place groups
            if all(m["seat"] != f["seat"] for m in group) and any(similar(m, f) for m in group):
                group.append(f)
                break
        else:
            groups.append([f])
            if place:
                by_location[place].append(groups[-1])
    return groups


def stance(votes: list[str]) -> str:
    """One judge's stance on a group from its votes on the group's members."""
    agree, dispute = "agree" in votes, "dispute" in votes
    if agree and not dispute:
        return "agree"
    if dispute and not agree:
        return "dispute"
    return "neutral"


def tier(agree: int, dispute: int) -> str:
    if dispute and dispute * 2 > agree + dispute:
        return "disputed"
    if agree and dispute:
        return "contested"
    if agree:
        return "confirmed"
    return "singleton"


def street_cred(seats: list[str], rankings: dict[str, list[str]]) -> tuple[dict, int, int]:
    """Each seat's mean rank from its peers (1 = ranked best), self-ranks left out.
    Returns (per seat {street_cred, ranks}, self_ranks_excluded, unknown_excluded)."""
    ranks: dict[str, list[int]] = {s: [] for s in seats}
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
        for position, seat in enumerate(order, start=1):
            ranks[seat].append(position)
    out = {s: {"street_cred": round(sum(r) / len(r), 3) if r else None, "ranks": r}
           for s, r in ranks.items()}
    return out, self_ranks, unknown


def tally(seats: list[str], findings: list[dict[str, Any]], votes: list[dict[str, Any]],
          rankings: dict[str, list[str]]) -> dict[str, Any]:
    """The tally document (``tally.json``); the same input always gives the same output."""
    author = {f["id"]: f["seat"] for f in findings}
    by_judge: dict[tuple[str, str], dict[str, Any]] = {}
    self_votes = unknown_votes = 0
    for v in votes:
        fid, judge, vote = v.get("finding"), v.get("judge"), v.get("vote")
        if fid not in author or vote not in VOTES:
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
        cast: dict[str, list[str]] = defaultdict(list)
        detail = []
        for v in sorted((v for fid in ids for v in on_finding[fid]),
                        key=lambda v: (v["judge"], natural_key(v["finding"]))):
            cast[v["judge"]].append(v["vote"])
            detail.append({"judge": v["judge"], "finding": v["finding"], "vote": v["vote"],
                           "reason": v.get("reason") or ""})
        stances = [stance(cast[j]) for j in sorted(cast)]
        counts = {k: stances.count(k) for k in VOTES}
        counts["judges"] = len(stances)
        counts["raised_by"] = len({m["seat"] for m in members})
        lead = members[0]
        severity = min((m.get("severity") for m in members),
                       key=lambda s: SEVERITIES.index(s) if s in SEVERITIES else len(SEVERITIES))
        groups_out.append({
            "id": gid, "tier": tier(counts["agree"], counts["dispute"]), "severity": severity,
            "location": lead.get("location", ""), "claim": lead.get("claim", ""),
            "findings": ids, "seats": [m["seat"] for m in members], "counts": counts,
            "votes": detail,
        })
        for fid in ids:
            finding_group[fid] = gid

    groups_out.sort(key=lambda g: (TIERS.index(g["tier"]),
                                   SEVERITIES.index(g["severity"])
                                   if g["severity"] in SEVERITIES else len(SEVERITIES),
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
        "excluded": {"self_votes": self_votes, "unknown_votes": unknown_votes,
                     "self_ranks": self_ranks, "unknown_ranks": unknown_ranks},
    }
