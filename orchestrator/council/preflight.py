"""Pre-flight: everything that can be checked before a council spends anything.

At least two seats, no seat twice, a chair that sat on no seat (a variant of a seat's model
may chair: it shares the weights, not the review), every model resolving with
its key present, and the context (``git diff``, files) assembled once. Each failure is one
line naming the problem and the fix (a usage mistake exits 2, anything else 1); nothing has
been sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.briefing import MAX_CONTEXT_BYTES, check_briefing, compose, read_context
from orchestrator.errors import UsageProblem
from orchestrator.models.addressing import BUILTIN_VARIANTS, ResolvedModel, check_key


@dataclass
class Plan:
    """A council run that passed pre-flight."""

    seats: list[ResolvedModel]
    chair: ResolvedModel
    briefing: str
    context: dict = field(default_factory=dict)  # {"diff": range | None, "files": [...]}
    notices: list[str] = field(default_factory=list)  # said once the run starts


def check_bench(seats: list[ResolvedModel], chair: ResolvedModel) -> list[str]:
    """Refuse a bench that cannot run; the notices for one that can (a chair that is a
    variant of a seat's model shares that seat's weights, and the run says so once)."""
    if len(seats) < 2:
        raise UsageProblem(f"a council needs at least 2 seats, got {len(seats)}; pass "
                        "--models a,b[,c...] or --council NAME")
    names = [s.name for s in seats]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageProblem(f"{', '.join(twice)} sits on two seats; to seat one model twice give "
                        "each copy a variant (e.g. MODEL@hot,MODEL@cold)")
    same = next((s for s in seats if (s.base_name, s.variant) == (chair.base_name,
                                                                    chair.variant)), None)
    if same is not None:
        taken = {s.variant for s in seats if s.base_name == chair.base_name}
        free = next((v for v in BUILTIN_VARIANTS if v not in taken), "NAME")
        raise UsageProblem(f"the chair {chair.name} is also a seat ({same.name}: same model, same "
                        "variant); the chair must not judge its own review: pass another "
                        f"model or another variant as --chair (e.g. {chair.base_name}@{free})")
    shared = [s.name for s in seats if s.base_name == chair.base_name]
    if shared:
        return [f"the chair {chair.name} is a variant of the seat {', '.join(shared)}: it "
                "shares that seat's weights, with its own sampling settings"]
    return []


def git_diff(rev_range: str, cwd: Path | None = None):
    """``git diff rev_range`` through the intake (orchestrator/intake/diff.py): credential
    files withheld by name, credential content withheld."""
    from orchestrator.intake.diff import read_diff

    return read_diff(rev_range, cwd, max_bytes=MAX_CONTEXT_BYTES)


def assemble(prompt: str, diff: str | None, paths: tuple[str, ...] | list[str],
             cwd: Path | None = None, rules: dict | None = None) -> tuple[str, dict]:
    """The composed briefing, read once and shared by every seat, and what went into it
    (what the intake withheld from the diff too). ``rules``: the workspace's ``deny`` and
    ``allow`` (plugin_config.workspace), which the diff's files follow as the tools' do."""

    from orchestrator.intake.diff import read_diff, section

    sections, context = [], {"diff": diff, "files": list(paths)}
    if diff:
        read = read_diff(diff, cwd, max_bytes=MAX_CONTEXT_BYTES, **(rules or {}))
        sections.append(section(diff, read))
        if read.note():
            from orchestrator.notices import say

            say(f"--diff {diff}: {read.note()}; the models see [withheld: ...] instead")
            context.update(read.to_dict())
    files = read_context(paths)
    if files:
        sections.append(files)
    return compose(prompt, "\n\n".join(sections)), context


def preflight(*, seats: list[ResolvedModel], chair: ResolvedModel, prompt: str,
              diff: str | None, paths, cwd: Path | None = None,
              prompt_source: str = "the prompt", rules: dict | None = None) -> Plan:
    notices = check_bench(seats, chair)
    for model in [*seats, chair]:
        check_key(model)
    briefing, context = assemble(prompt, diff, paths, cwd, rules)
    check_briefing(briefing, prompt_source)  # a key orch sends is never in what it sends
    return Plan(seats=seats, chair=chair, briefing=briefing, context=context, notices=notices)
