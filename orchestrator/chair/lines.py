"""A structured synthesis as the terminal says it: consensus, disagreements with the answers
(and the models behind the labels) on each side, points one answer raised, the resolution.
Plain lines: the face prints them."""

from __future__ import annotations

from typing import Any


def synthesis_lines(synthesis: dict[str, Any] | None) -> list[str]:
    if not synthesis:
        return []
    labels = synthesis.get("labels") or {}

    def who(names: list[str]) -> str:
        return ", ".join(f"{n} ({labels[n]['model']})" if n in labels else n for n in names) \
            or "no answer named"

    how = synthesis.get("source")
    lines = [f"Structured synthesis ({'read from its ' + how if how else 'unreadable'}"
             f"{': ' + synthesis['problem'] if synthesis.get('problem') else ''}):"]
    if synthesis.get("problem"):
        return lines
    if synthesis["consensus"]:
        lines.append("Consensus:")
        lines += [f"  - {c}" for c in synthesis["consensus"]]
    if synthesis["disagreements"]:
        lines.append("Disagreements:")
        for d in synthesis["disagreements"]:
            lines.append(f"  - {d['point'] or '(no point named)'}")
            lines += [f"      {who(s['answers'])}: {s['position']}" for s in d["sides"]]
    if synthesis["unique"]:
        lines.append("Raised by one answer:")
        lines += [f"  - {who([u['answer']] if u['answer'] else [])}: {u['point']}"
                  for u in synthesis["unique"]]
    if synthesis["resolution"]:
        lines.append(f"Resolution: {synthesis['resolution']}")
    if synthesis.get("unknown_labels"):
        lines.append(f"(labels it named that no answer had: "
                     f"{', '.join(synthesis['unknown_labels'])})")
    return lines
