"""Reading a finished bench trial by trial (``orch bench show``): the list of trials, and
one trial's prompt, answer, steps and check output. Everything comes from the results
file, except a model trial's steps, read from its leg's ``conversation.jsonl`` when the
runs folder still has it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STEP_TEXT_KEEP = 400  # characters of each step's text shown


def outcome(row: dict[str, Any]) -> str:
    return "EXCL" if row.get("excluded") else "PASS" if row.get("passed") else "FAIL"


def listing(doc: dict[str, Any], task: str | None = None) -> list[str]:
    """One line per trial (of ``task``, when given)."""
    rows = [r for r in doc["trials"] if task is None or r["task"] == task]
    out = []
    for r in rows:
        why = r.get("excluded") or r.get("reason") or ""
        out.append(f"{outcome(r)} {r['task']} · {r['contestant']} #{r['trial']} · "
                   f"{float(r.get('secs') or 0):.1f}s · {r.get('steps') or 0} steps"
                   + (f" ({why})" if why else "")
                   + (" · regraded from its saved answer" if r.get("regraded") else ""))
    return out


def prompt_of(doc: dict[str, Any], task: str) -> str | None:
    """The prompt the trial got: saved with the results (benches since issue 29)."""
    return (doc.get("prompts") or {}).get(task)


def steps(runs_dir: Path | None, leg_id: str | None) -> list[str] | None:
    """A model trial's requests and responses, one line each; None when its leg folder is
    gone (``runs gc``) or the trial was a command."""
    if runs_dir is None or not leg_id:
        return None
    path = runs_dir / leg_id / "conversation.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    out = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") != "response":
            continue
        calls = event.get("tool_calls") or []
        said = " ".join(str(event.get("text") or "").split())
        if len(said) > STEP_TEXT_KEEP:
            said = said[:STEP_TEXT_KEEP] + "…"
        tools = ", ".join(f"{(c.get('function') or c).get('name', '?')}"
                          f"({str((c.get('function') or c).get('arguments', ''))[:80]})"
                          for c in calls if isinstance(c, dict))
        usage = event.get("usage") or {}
        out.append(f"step {event.get('step')}: " + (f"tools {tools}" if tools else said or "—")
                   + f"  [{usage.get('input_tokens', '?')} in, "
                     f"{usage.get('output_tokens', '?')} out]")
    return out


def trial_text(doc: dict[str, Any], row: dict[str, Any], runs_dir: Path | None) -> str:
    """Everything about one trial, for reading."""
    head = (f"== {row['task']} · {row['contestant']} #{row['trial']}: {outcome(row)}"
            f" · status {row.get('status')} · {float(row.get('secs') or 0):.1f}s"
            f" · {row.get('steps') or 0} steps · tokens "
            f"{'—' if row.get('tokens') is None else row['tokens']}"
            f" · cost {'—' if row.get('cost_usd') is None else row['cost_usd']}")
    parts = [head]
    for label, value in (("excluded", row.get("excluded")), ("reason", row.get("reason")),
                         ("regraded", row.get("regraded")), ("command", row.get("command"))):
        if value:
            parts.append(f"{label}: {value}")
    if row.get("deliberation"):
        parts.append(f"deliberation: {deliberation_text(row['deliberation'])}")
    prompt = prompt_of(doc, row["task"])
    parts += ["-- prompt", prompt if prompt is not None else
              "(not saved in this results file; the template: "
              f"{doc['settings'].get('prompt', '{task}')})"]
    parts += ["-- answer", row.get("answer") or "(empty)"]
    if row.get("answer_chars") and row["answer_chars"] > len(row.get("answer") or ""):
        parts.append(f"(the first {len(row['answer']):,} of {row['answer_chars']:,} characters)")
    found = steps(runs_dir, row.get("leg_id")) if row.get("kind") == "model" else None
    if found is not None:
        parts += ["-- steps", *found] if found else ["-- steps", "(none recorded)"]
    elif row.get("kind") == "model":
        parts += ["-- steps", f"(its leg folder {row.get('leg_id')} is gone)"]
    for label in ("stdout", "stderr"):
        if row.get(label):
            parts += [f"-- {label} (the end)", row[label]]
    parts += ["-- check output", row.get("check_output") or "(nothing)"]
    return "\n".join(parts)


def deliberation_text(d: dict[str, Any]) -> str:
    """A deliberating trial's rounds in one line: how many ran, what stopped it, what was
    graded."""
    votes = f" ({d['winner_votes']} votes)" if d.get("winner_votes") else ""
    if d.get("winner_votes") and d.get("winner_support"):
        votes = f" (support {d['winner_support']}: {d['winner_votes']} votes from other legs)"
    return (f"{d.get('rounds')} of at most {d.get('max_rounds')} rounds, stopped by "
            f"{d.get('stop')} after round {d.get('after_round')}; {d.get('requests')} "
            f"requests; graded: {d.get('answer_from')}{votes}")
