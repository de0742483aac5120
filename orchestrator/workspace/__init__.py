"""The public confinement API: a path a model (or an agent) names, read under the workspace's
rules, for third-party tools and orch's own surfaces alike.

The rules live here in the core (:mod:`orchestrator.workspace.paths`, the confinement checks;
:mod:`orchestrator.workspace.policy`, the deny-list and ``.gitignore``), and the built-in
workspace tools (``orch_plugins.workspace``) import them: the path resolved as the operating
system would (symlinks followed, ``..`` applied after them) and kept under the root; the
credential deny-list (``.env*``, ``.ssh/``, ``id_*``, ``.git/config``, ... case-insensitive;
a hard link to one by inode); never ``/proc``, ``/sys`` or ``/dev``; regular files only; a
size limit; text only. What is read has its credential content withheld
(:mod:`orchestrator.security.credential_content`).

    from orchestrator import workspace

    try:
        text = workspace.read_text(path, leg.workspace, **workspace.rules(leg))
    except workspace.PathRefused as refused:
        return f"error: {refused}"  # one line a model can act on

Every refusal is a :class:`PathRefused` whose ``str()`` says what to send instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.workspace.paths import PathRefused, Workspace

__all__ = ["MAX_BYTES", "PathRefused", "read_text", "resolve", "rules"]

MAX_BYTES = 8_000_000  # the built-in ``read`` tool's own limit (max_file_bytes)


def __getattr__(name: str) -> Any:
    """``PathRefused`` on first use: a plugin that imports this module at start-up (for a
    tool it declares) does not pay for the rules (pathspec, the credential scanner) until a
    path is read, so ``orch --help`` stays light."""
    if name == "PathRefused":
        from orchestrator.workspace.paths import PathRefused

        return PathRefused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rules(leg: Any) -> dict[str, Any]:
    """The ``deny`` and ``allow`` patterns the user configured for the workspace tools
    (``plugin_config.workspace``), as keyword arguments for :func:`resolve`/:func:`read_text`."""
    settings = leg.plugin_config("workspace") if leg is not None else {}
    return {"deny": settings.get("deny", ()), "allow": settings.get("allow", ())}


def _workspace(root: str | os.PathLike, deny: Iterable[str], allow: Iterable[str]) -> Workspace:
    from orchestrator.workspace.paths import PathRefused, Workspace

    if root is None:
        raise PathRefused("there is no workspace to read from; pass the text itself")
    return Workspace(root, list(deny), list(allow))


def resolve(path: str, root: str | os.PathLike, *, want: str | None = "file",
            deny: Iterable[str] = (), allow: Iterable[str] = ()) -> Path:
    """The real path ``path`` names under ``root``, or :class:`PathRefused`.

    ``path`` is relative to ``root`` (an absolute path must lie inside it); ``want`` is
    ``"file"`` (a regular file, the default), ``"dir"`` or None (either)."""
    return Path(_workspace(root, deny, allow).resolve(path, want=want))


def read_text(path: str, root: str | os.PathLike, *, max_bytes: int = MAX_BYTES,
              deny: Iterable[str] = (), allow: Iterable[str] = ()) -> str:
    """The text of the file ``path`` names under ``root`` (UTF-8, undecodable bytes
    replaced), with its credential content withheld as ``[withheld: RULE]``; or
    :class:`PathRefused` (outside the root, deny-listed, not a regular file, larger than
    ``max_bytes``, binary)."""
    from orchestrator.security.credential_content import withhold
    from orchestrator.workspace.paths import PathRefused

    ws = _workspace(root, deny, allow)
    try:
        real = ws.resolve(path, want="file")
        size = os.path.getsize(real)
        if size > max_bytes:
            raise PathRefused(f"{ws.rel(real)!r} is {size:,} bytes, more than the "
                              f"{max_bytes:,} this tool reads; pick a smaller file")
        ws.check_text(real)
        with open(real, encoding="utf-8", errors="replace", newline="") as fh:
            text = fh.read(max_bytes + 1)
    except OSError as exc:
        raise PathRefused(f"{path!r} cannot be read ({exc.strerror or exc})") from None
    return withhold(text).text
