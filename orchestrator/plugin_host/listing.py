"""The ``orch`` entry points, read from the installed distributions or remembered on disk.

Reading them means importing ``importlib.metadata`` (and the ``email`` parser under it) and
opening every distribution's metadata: 60 ms of the 160 ms `orch --help` took. The listing is
a cache of that read, never a second source: it is used only while ``sys.path`` holds the same
folders with the same modification times (installing, upgrading or removing a distribution
adds or removes its ``.dist-info`` folder there, which changes the folder's time), under the
same Python. Anything else, or any doubt, reads the distributions again.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.plugin_host.remembered import cache_file, installed, recall, remember

VERSION = 1
OWN_DISTRIBUTION = "orch"
# importlib.metadata's own pattern for an entry point's value: module[:attr][ [extras]]
VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


@dataclass(frozen=True)
class Found:
    """One entry point: its name, ``module:attr``, the distribution and version it came
    from, and the distribution that already took its name (a clash), if any."""

    name: str
    value: str
    dist: str | None
    version: str | None
    taken_by: str | None = None

    def load(self):
        """What the entry point names, as ``importlib.metadata.EntryPoint.load`` gets it."""
        match = VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: {self.value!r} is not module:attr")
        module = importlib.import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)


def entry_points(group: str, home: Path | None) -> list[Found]:
    """Each entry point of ``group``, built-ins first, then by name; a clash after them."""
    path = cache_file(home, "entry-points") if home is not None else None
    key = {"v": VERSION, "group": group, **installed()}
    entry = recall(path, key) if path is not None else None
    if entry is not None:
        try:
            return [Found(**fields) for fields in entry["found"]]
        except (KeyError, TypeError):
            pass
    found = read(group)
    if path is not None:
        remember(path, {"key": key, "found": [asdict(f) for f in found]})
    return found


def read(group: str) -> list[Found]:
    """The entry points as the installed distributions say now."""
    from importlib import metadata

    @functools.cache
    def meta(dist) -> tuple[str | None, str | None]:
        if dist is None:
            return None, None
        data = dist.metadata  # parses METADATA again on each access: once per distribution
        return data["Name"], data["Version"]

    eps = sorted(metadata.entry_points(group=group),
                 key=lambda ep: (meta(ep.dist)[0] != OWN_DISTRIBUTION, ep.name))
    seen: dict[str, Found] = {}
    clashes: list[Found] = []
    for ep in eps:
        dist, version = meta(ep.dist)
        found = Found(ep.name, ep.value, dist, version)
        first = seen.setdefault(ep.name, found)
        if first is not found and first.dist != dist:
            clashes.append(Found(ep.name, ep.value, dist, version, taken_by=first.dist))
        # else: the same distribution on the path twice (an editable install): one copy
    return list(seen.values()) + clashes
