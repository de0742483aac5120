"""Which directory the workspace tools may read: a safe default, never a home or ``/``.

Without ``--workspace`` it is the root of the git work tree holding the current directory
(the project under review). Outside any work tree the tools are off for that run, with one
notice: a model is never handed a home directory because that is where orch was started.
``--workspace`` may name any directory except ``$HOME`` and ``/``, which need
``--workspace-any``."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import UsageProblem

NO_WORKSPACE = "no workspace: pass --workspace DIR to give models read access"


def git_root(start: Path) -> Path | None:
    """The work tree containing ``start`` (a ``.git`` directory or worktree file), if any."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _too_wide(path: Path) -> bool:
    home = Path(os.path.expanduser("~")).resolve()
    return path == Path(path.anchor) or path == home


def choose(workspace: str | None, *, allow_any: bool = False,
           cwd: Path | None = None) -> tuple[Path | None, str | None]:
    """(root, notice): the directory the tools read, or None and the one-line notice why not."""
    if workspace:
        root = Path(workspace).expanduser().resolve()
        if not root.is_dir():
            raise UsageProblem(f"--workspace {workspace} is not a directory; pass an existing "
                            "directory (default: the git work tree you are in)")
        if _too_wide(root) and not allow_any:
            raise UsageProblem(f"--workspace {workspace} is your home directory or /: models "
                            "could read everything in it; pass a project directory, or add "
                            "--workspace-any if you mean it")
        return root, None
    cwd = (cwd or Path.cwd()).resolve()
    root = git_root(cwd)
    if root is None or _too_wide(root):
        return None, NO_WORKSPACE
    return root, None
