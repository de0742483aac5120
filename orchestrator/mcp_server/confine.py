"""Paths an agent passes to orch's MCP tools stay inside the workspace.

On the command line ``-c FILE`` is the human's choice. Over MCP the caller is a coding agent
that a file or a web page may have prompt-injected, so its ``context`` paths pass the very
rules the workspace tools apply to a model (orchestrator/workspace/): inside the
workspace root once symlinks and ``..`` are resolved, not deny-listed (``.env``, keys,
credential files), a regular file. Anything else is a one-line tool error; nothing is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import OrchError


def _workspace(cwd: Path, first: str):
    """The workspace the agent's paths must stay in: the git work tree around the directory
    orch mcp runs in (as the workspace tools'), else that directory itself, never a home
    directory or /; with the workspace plugin's deny/allow."""
    from orchestrator import runtime
    from orchestrator.security.workspace_root import _too_wide, choose
    from orchestrator.workspace.paths import Workspace

    root, _notice = choose(None, cwd=cwd)
    if root is None and not _too_wide(cwd):
        root = cwd
    if root is None:
        raise OrchError(f"context {first!r} refused: orch mcp runs in {cwd}, a home directory "
                        "or /, so agents may pass no file; start orch mcp in the project")
    settings = (runtime.config().data.get("plugin_config") or {}).get("workspace") or {}
    if not isinstance(settings, dict):
        settings = {}
    return Workspace(root, settings.get("deny", ()), settings.get("allow", ()))


def context_paths(raw_paths: list[str] | tuple[str, ...], cwd: Path | None = None) -> list[str]:
    """Each ``context`` path, checked, as a path relative to ``cwd`` naming the resolved
    file; :class:`OrchError` (one line) for the first that leaves the workspace."""
    if not raw_paths:
        return []
    from orchestrator.workspace.paths import Refused

    cwd = (cwd or Path.cwd()).resolve()
    ws = _workspace(cwd, str(raw_paths[0]))
    checked = []
    for raw in raw_paths:
        if not isinstance(raw, str) or not raw.strip():
            raise OrchError("context: a path is empty; pass file paths inside the project")
        asked = os.path.join(cwd, raw)  # an absolute path stays as it is
        try:
            if not os.path.lexists(asked):  # nothing there: read_context says so, if inside
                if not ws.inside(os.path.normpath(asked)):
                    raise Refused(f"{asked!r} is outside the workspace root")
                checked.append(raw)
                continue
            real = ws.resolve(asked)  # inside, not through a link out, not denied, no device
        except Refused as exc:
            why = str(exc).split("; ")[0].split(". ")[0]
            raise OrchError(f"context {raw!r} refused: {why.replace(repr(asked), 'it')} "
                            f"(agents may pass only files inside {ws.root})") from None
        # a directory is read_context's to refuse, in its own words
        checked.append(raw if os.path.isdir(real) else os.path.relpath(real, cwd))
    return checked
