"""Pre-flight: everything that can be checked before a council spends anything.

At least two seats, no seat twice, a chair that sat on no seat (a variant of a seat's model
may chair: it shares the weights, not the review), every model resolving with
its key present, and the context (``git diff``, files) assembled once. Each failure is one
line naming the problem and the fix (OrchError, exit 1); nothing has been sent.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.briefing import MAX_CONTEXT_BYTES, check_briefing, compose, read_context
from orchestrator.errors import OrchError
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
        raise OrchError(f"a council needs at least 2 seats, got {len(seats)}; pass "
                        "--models a,b[,c...] or --council NAME")
    names = [s.name for s in seats]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OrchError(f"{', '.join(twice)} sits on two seats; to seat one model twice give "
                        "each copy a variant (e.g. MODEL@hot,MODEL@cold)")
    same = next((s for s in seats if (s.base_name, s.variant) == (chair.base_name,
                                                                    chair.variant)), None)
    if same is not None:
        taken = {s.variant for s in seats if s.base_name == chair.base_name}
        free = next((v for v in BUILTIN_VARIANTS if v not in taken), "NAME")
        raise OrchError(f"the chair {chair.name} is also a seat ({same.name}: same model, same "
                        "variant); the chair must not judge its own review: pass another "
                        f"model or another variant as --chair (e.g. {chair.base_name}@{free})")
    shared = [s.name for s in seats if s.base_name == chair.base_name]
    if shared:
        return [f"the chair {chair.name} is a variant of the seat {', '.join(shared)}: it "
                "shares that seat's weights, with its own sampling settings"]
    return []


def git_diff(rev_range: str, cwd: Path | None = None) -> str:
    if rev_range.startswith("-"):
        raise OrchError(f"--diff {rev_range!r} is not a revision range; pass e.g. main..HEAD")
    try:
        proc = subprocess.run(["git", "diff", "--no-color", "--no-ext-diff", rev_range, "--"],
                              cwd=cwd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise OrchError("--diff needs git, which is not installed; pass --context "
                        "FILE instead") from None
    except subprocess.TimeoutExpired:
        raise OrchError(f"git diff {rev_range} took more than 60 s; pass a narrower "
                        "range") from None
    if proc.returncode != 0:
        if "not a git repository" in proc.stderr.lower():
            raise OrchError("--diff needs a git work tree, and this directory is not in one: "
                            "run orch inside the repository, or pass --context FILE instead")
        raise OrchError(f"git diff {rev_range} failed: {_git_reason(proc.stderr)}; run it "
                        "here to check the range")
    if not proc.stdout.strip():
        raise OrchError(f"git diff {rev_range} is empty: there is nothing to review; check "
                        "the range (e.g. main..HEAD)")
    if len(proc.stdout.encode()) > MAX_CONTEXT_BYTES:
        raise OrchError(f"git diff {rev_range} is more than {MAX_CONTEXT_BYTES:,} bytes; "
                        "review a narrower range")
    return proc.stdout


def _git_reason(stderr: str) -> str:
    """git's own words without its `fatal:`/`error:`/`warning:` prefixes or usage dump."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for prefix in ("fatal:", "error:"):
        for ln in lines:
            if ln.startswith(prefix):
                return ln[len(prefix):].strip()
    first = lines[0] if lines else "git failed"
    return first.removeprefix("warning:").strip()


def assemble(prompt: str, diff: str | None, paths: tuple[str, ...] | list[str],
             cwd: Path | None = None) -> tuple[str, dict]:
    """The composed briefing, read once and shared by every seat, and what went into it."""
    sections = []
    if diff:
        sections.append(f"### Diff: git diff {diff}\n\n```diff\n{git_diff(diff, cwd).rstrip()}"
                        "\n```")
    files = read_context(paths)
    if files:
        sections.append(files)
    return compose(prompt, "\n\n".join(sections)), {"diff": diff, "files": list(paths)}


def preflight(*, seats: list[ResolvedModel], chair: ResolvedModel, prompt: str,
              diff: str | None, paths, cwd: Path | None = None,
              prompt_source: str = "the prompt") -> Plan:
    notices = check_bench(seats, chair)
    for model in [*seats, chair]:
        check_key(model)
    briefing, context = assemble(prompt, diff, paths, cwd)
    check_briefing(briefing, prompt_source)  # a key orch sends is never in what it sends
    return Plan(seats=seats, chair=chair, briefing=briefing, context=context, notices=notices)
