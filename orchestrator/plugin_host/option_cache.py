"""The plugins' declared options remembered on disk, so ``orch fanout --help`` (and the option
parsing of every run) does not scan the entry points and import the declaring plugins each
time: that scan and those imports were half of its start-up (docs/performance.md).

A cache of the declarations, never a second source: an entry is used only while everything
the declarations were read from is unchanged: the command, the plugin selection (config's
``plugins`` section, ``ORCH_PLUGINS``, ``ORCH_DISABLE_PLUGINS``), ``sys.path`` with the
modification time of each of its folders (installing or removing a distribution adds or
removes its ``.dist-info`` there), the plugins directory's files (added, removed or edited:
directory.stamps), and the size and modification time of every file the
declaring plugins' code came from. Anything else, or any doubt (a file that cannot be read or
written, an option that does not round-trip through JSON), reads the plugins as before.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from orchestrator.plugin_host.remembered import cache_file as _cache_file
from orchestrator.plugin_host.remembered import installed, recall, remember, stamp

VERSION = 1
ENV = ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS", "ORCH_PLUGINS_DIR")


def key(command: str, reserved, plugins_section: dict | None) -> dict[str, Any]:
    """What the declarations depend on, besides the declaring files (stamped on write)."""
    from orchestrator.plugin_host import directory

    return {"v": VERSION, "command": command, "reserved": sorted(reserved),
            "plugins": plugins_section or {}, "env": {n: os.environ.get(n) for n in ENV},
            "files": directory.stamps(plugins_section), **installed()}


def cache_file(home: Path, command: str) -> Path:
    return _cache_file(home, f"options-{command}")


def read(path: Path, wanted: dict[str, Any]) -> tuple[list, list[str]] | None:
    """([(plugin, Option)], warnings) as remembered, or None when there is no entry that is
    still true."""
    entry = recall(path, wanted)
    if entry is None:
        return None
    files = entry.get("files") or {}
    if any(stamp(f) != held for f, held in files.items()):
        return None
    try:
        return _rebuild(entry["declared"]), [str(w) for w in entry.get("warnings", [])]
    except (KeyError, TypeError, ValueError):
        return None


def sources(pm) -> list[str]:
    """Every file the plugins that implement ``register_options`` were loaded from (as read
    when each was loaded: snapshot.py)."""
    out: set[str] = set()
    for name in pm.implementers("register_options"):
        info = pm.infos.get(name)
        if info is not None:
            out.update(info.files)
    return sorted(out)


def write(path: Path, wanted: dict[str, Any], declared: list, warnings: list[str],
          files: list[str]) -> None:
    """Remember the declarations, atomically; a cache that cannot be written is skipped."""
    stamps = {f: stamp(f) for f in files}
    if any(s is None for s in stamps.values()):
        return  # a declaration not from a file (built in a test process): not remembered
    entry = {"key": wanted, "files": stamps, "warnings": warnings,
             "declared": [(plugin, dataclasses.asdict(option)) for plugin, option in declared]}
    try:
        if _rebuild(json.loads(json.dumps(entry))["declared"]) != declared:
            return  # an option that does not round-trip through JSON: not remembered
    except (TypeError, ValueError):
        return
    remember(path, entry)


def _rebuild(entries: list) -> list:
    """[(plugin, Option)] from their JSON form (lists back to tuples)."""
    from orchestrator.options import Option

    return [(plugin, Option(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in fields.items()}))
            for plugin, fields in entries]
