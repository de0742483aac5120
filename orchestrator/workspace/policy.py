"""Which files in the workspace a model may see: credential files never, ignored files unasked.

- A built-in deny-list of credential files applies whatever the workspace (a home directory,
  a project with a ``.env``): ``read`` refuses them naming the rule, ``grep``/``glob``/``list``
  leave them out and say how many, and by which rules. ``plugin_config.workspace.deny`` adds
  gitignore-style patterns; ``plugin_config.workspace.allow`` lets chosen paths through
  (e.g. ``.env.example``).
- ``grep``, ``glob`` and ``list`` skip what ``.gitignore`` files ignore, as ripgrep does;
  ``read`` of an ignored file by name still works unless it is deny-listed.
- Nothing under ``/proc``, ``/sys`` or ``/dev`` is ever opened: their "regular files" block,
  or consume what they hand out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pathspec

BUILTIN_DENY: tuple[str, ...] = (
    # SSH keys by their conventional names (id_rsa, id_ecdsa, id_work, ...) at any depth, and
    # their backups; a dotted name (id_utils.py, id_rsa.pub) is code or a public key. The
    # negation must come right after ``id_*``: a later rule (``*credentials*``) still denies.
    "id_*", "!id_*.*", "id_*.bak", "id_*.old", "id_*.orig",
    ".env*", ".ssh/", ".aws/", ".gnupg/", ".netrc", ".npmrc", ".pypirc", ".pgpass",
    ".vault-token", "**/gh/hosts.yml", ".docker/config.json", ".kube/config", "*.pem", "*.key",
    "*.p12", "*.pfx", "*.ppk", "*credentials*", ".git-credentials",
    # a remote URL with a token in it, or an ``http.extraheader``; at any depth (submodules)
    "**/.git/config", "**/.git/modules/**/config",
)
SYSTEM_DIRS: tuple[str, ...] = ("/proc", "/sys", "/dev")


def under_system_dir(real: str) -> bool:
    """True for anything under /proc, /sys or /dev (never read, never walked)."""
    return any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRS)


def _patterns(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [p for p in value if isinstance(p, str) and p.strip()]
    return []


class Policy:
    """The deny-list, the allow-list and the workspace's .gitignore files, for one root."""

    def __init__(self, root: str, deny: object = (), allow: object = ()) -> None:
        self.root = root
        self.rules = [*BUILTIN_DENY, *_patterns(deny)]
        # Case-insensitive: ``.ENV`` and ``ID_RSA`` are the same files on macOS and Windows,
        # and a renamed copy is still the credential.
        self._deny = pathspec.GitIgnoreSpec.from_lines([r.lower() for r in self.rules])
        self._allow = pathspec.GitIgnoreSpec.from_lines([p.lower() for p in _patterns(allow)])
        self._ignores: dict[str, pathspec.GitIgnoreSpec | None] = {}

    @staticmethod
    def _key(rel: str, is_dir: bool) -> str:
        return rel + "/" if is_dir and not rel.endswith("/") else rel

    def denied(self, rel: str, is_dir: bool = False) -> str | None:
        """The deny rule that covers ``rel`` (relative to the root), or None."""
        if rel in ("", "."):
            return None
        key = self._key(rel, is_dir).lower()
        if self._allow.match_file(key):
            return None
        hit = self._deny.check_file(key)
        return self.rules[hit.index] if hit.include and hit.index is not None else None

    def refusal(self, rel: str, rule: str) -> str:
        return (f"{rel!r} is refused by the credential deny-list (rule {rule!r}): credential "
                "files are never sent to a model. Ask the user for what you need from it")

    # -- .gitignore ------------------------------------------------------------------------
    def _ignore_spec(self, directory: str) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._ignores:
            spec = None
            path = os.path.join(directory, ".gitignore")
            try:
                if os.path.isfile(path) and os.path.getsize(path) < 1_000_000:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        spec = pathspec.GitIgnoreSpec.from_lines(fh.read().splitlines())
            except (OSError, ValueError):
                spec = None
            self._ignores[directory] = spec
        return self._ignores[directory]

    def ignored(self, real: str, is_dir: bool = False) -> bool:
        """Whether a .gitignore between the root and ``real`` ignores it (the deepest file
        with an opinion wins, as in git). The caller walks top-down, so an ignored parent
        directory has already been skipped."""
        parent = os.path.dirname(real)
        for directory in _ancestors(parent, self.root):
            spec = self._ignore_spec(directory)
            if spec is None:
                continue
            rel = os.path.relpath(real, directory).replace(os.sep, "/")
            verdict = spec.check_file(self._key(rel, is_dir)).include
            if verdict is not None:
                return verdict
        return False


def _ancestors(directory: str, root: str) -> Iterable[str]:
    """``directory`` up to and including ``root``, deepest first."""
    while True:
        yield directory
        if directory == root or len(directory) <= len(root):
            return
        directory = os.path.dirname(directory)


def withheld_note(counts: dict[str, int]) -> str:
    """One line for a result that left deny-listed or ignored paths out."""
    parts = []
    denied = sum(n for rule, n in counts.items() if rule != ".gitignore")
    if denied:
        rules = ", ".join(repr(r) for r in sorted(r for r in counts if r != ".gitignore"))
        parts.append(f"{denied} withheld by the credential deny-list (rules {rules})")
    if counts.get(".gitignore"):
        parts.append(f"{counts['.gitignore']} ignored by .gitignore (read them by name if "
                     "you need them)")
    return f"[{'; '.join(parts)}]" if parts else ""
