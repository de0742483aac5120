"""``--diff A..B`` (and ``orch mcp``'s ``diff`` argument): a revision range as the models see
it, file by file under the workspace's credential rules.

A repository's history can hold what its work tree no longer shows: a committed ``.env``, a
deploy key. So the diff is read per file, as the workspace tools read files: a path the
credential deny-list covers (``.env*``, ``id_*``, ``*.pem``, ... and
``plugin_config.workspace.deny``/``allow``) is left out by git itself (an exclude pathspec)
and named with its rule, and what remains passes the credential-content scan like any other
text of a briefing. Renames are read as a delete and an add, so a credential file renamed to
an innocent name is still withheld under its old name's rule and scanned under its new one.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import OrchError

TIMEOUT_S = 60


@dataclass(frozen=True)
class Diff:
    """The diff as it may be sent, and what was withheld from it."""

    text: str
    files: tuple[str, ...]  # every path the range touches (repository-relative)
    denied: dict[str, str] = field(default_factory=dict)  # path -> deny rule
    rules: tuple[str, ...] = ()  # credential-content rules that fired

    def note(self) -> str | None:
        """One line for stderr when something was withheld."""
        parts = []
        if self.denied:
            rules = ", ".join(sorted({repr(r) for r in self.denied.values()}))
            parts.append(f"{', '.join(sorted(self.denied))} withheld by the credential "
                         f"deny-list (rules {rules})")
        if self.rules:
            parts.append(f"credential content withheld (rules: {', '.join(self.rules)})")
        return "; ".join(parts) or None

    def to_dict(self) -> dict:
        return {"withheld_files": dict(sorted(self.denied.items())),
                "withheld_rules": list(self.rules)}


def _git(args: list[str], rev_range: str, cwd: Path | None) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except FileNotFoundError:
        raise OrchError("--diff needs git, which is not installed; pass --context "
                        "FILE instead") from None
    except subprocess.TimeoutExpired:
        raise OrchError(f"git diff {rev_range} took more than {TIMEOUT_S} s; pass a narrower "
                        "range") from None
    if proc.returncode != 0:
        if "not a git repository" in proc.stderr.lower():
            raise OrchError("--diff needs a git work tree, and this directory is not in one: "
                            "run orch inside the repository, or pass --context FILE instead")
        raise OrchError(f"git diff {rev_range} failed: {_git_reason(proc.stderr)}; run it "
                        "here to check the range")
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


def read_diff(rev_range: str, cwd: Path | None = None, *, deny=(), allow=(),
              max_bytes: int = 2_000_000) -> Diff:
    """``git diff rev_range`` with credential files withheld by name and credential content
    withheld, or a one-line OrchError."""
    from orchestrator.workspace.policy import Policy

    if rev_range.startswith("-") or not rev_range.strip():
        raise OrchError(f"--diff {rev_range!r} is not a revision range; pass e.g. main..HEAD")
    if ":" in rev_range:  # REV:PATH names a subtree: its paths lose the folders the rules see
        raise OrchError(f"--diff {rev_range!r} names a path inside a revision (REV:PATH); pass "
                        "a range of commits, e.g. main..HEAD")
    base = ["-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff", "--no-renames",
            "--no-textconv"]
    names = [n for n in _git([*base, "-z", "--name-only", rev_range, "--"], rev_range,
                             cwd).split("\0") if n]
    policy = Policy(str(cwd or Path.cwd()), deny, allow)
    denied = {name: rule for name in names if (rule := _denied(policy, name))}
    excludes = [f":(top,exclude,literal){name}" for name in denied]
    text = _git([*base, rev_range, "--", ":(top)", *excludes], rev_range, cwd) \
        if len(denied) < len(names) else ""
    if not names:
        raise OrchError(f"git diff {rev_range} is empty: there is nothing to review; check "
                        "the range (e.g. main..HEAD)")
    if len(text.encode()) > max_bytes:
        raise OrchError(f"git diff {rev_range} is more than {max_bytes:,} bytes; "
                        "review a narrower range")
    rules: tuple[str, ...] = ()
    from orchestrator.security.secrets import find_position

    # a key orch itself sends is refused by check_briefing, naming where; withholding it
    # here would hide that the user is about to send their own key
    if text and find_position(text) is None:
        from orchestrator.intake.admit import admit_text

        got = admit_text(text)
        text, rules = got.text, got.withheld
    return Diff(text, tuple(names), denied, rules)


def _denied(policy, name: str) -> str | None:
    """The deny rule for a repository path or any folder above it (``.ssh/``)."""
    parts = name.split("/")
    for n in range(1, len(parts)):
        rule = policy.denied("/".join(parts[:n]), is_dir=True)
        if rule:
            return rule
    return policy.denied(name)


def section(rev_range: str, diff: Diff) -> str:
    """The diff as a section of the briefing: the diff, then the files withheld, named."""
    lines = [f"### Diff: git diff {rev_range}", ""]
    if diff.text.strip():
        lines += ["```diff", diff.text.rstrip(), "```"]
    if diff.denied and diff.text.strip():
        lines.append("")
    for name, rule in sorted(diff.denied.items()):
        lines.append(f"[withheld: {name} — a credential file (deny-list rule {rule!r}); orch "
                     "never sends credential files to a model]")
    return "\n".join(lines)
