"""The workspace tools' confinement rules, which live in the core
(:mod:`orchestrator.workspace.paths`): a plugin imports the core, never the other way round.
Kept so ``orch_plugins.workspace_paths`` still names them; new code imports the core's
public :mod:`orchestrator.workspace` (or its ``paths``/``policy`` modules) instead."""

from orchestrator.workspace.paths import (
    PathRefused,
    Refused,
    Workspace,
    glob_regex,
    kind,
)

__all__ = ["PathRefused", "Refused", "Workspace", "glob_regex", "kind"]
