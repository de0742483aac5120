"""Single-file plugins: every ``*.py`` in the plugins directory is a plugin named by its file.

The directory is ``--plugins-dir`` (which sets ``ORCH_PLUGINS_DIR``), else config
``plugins.dir``, else ``ORCH_HOME/plugins``. A file is found here and nothing more: it is
loaded by ``plugins.load`` exactly as an installed entry point is (imported and read through
the runner, listed, enabled and disabled by name, its options declared), so a file and a
package behave the same. A file whose name an installed plugin already has is refused (the
installed one keeps it) and named, like two distributions declaring one name.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "ORCH_PLUGINS_DIR"
FLAG = "--plugins-dir"
SOURCE = "plugins dir"  # what `orch plugins` shows as a file plugin's source
_MODULE_PREFIX = "orch_plugin_file_"


@dataclass(frozen=True)
class FileFound:
    """One plugin file, shaped like ``listing.Found``: its name, its path as ``value``,
    no distribution or version, and the installed distribution that already has its name."""

    name: str
    value: str
    dist: str | None = None
    version: str | None = None
    taken_by: str | None = None
    refused: str | None = None  # why it is not run at all (someone else could write it)

    def load(self):
        """The file imported as a module (plugin code runs: only through the runner)."""
        return import_file(self.name, Path(self.value))  # runner: only inside import_plugin


def where(config_plugins: dict | None) -> Path | None:
    """The plugins directory in force, or None when no home can be found."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    configured = (config_plugins or {}).get("dir")
    if isinstance(configured, str) and configured:
        return Path(configured).expanduser()
    from orchestrator.config import home

    try:
        return home() / "plugins"
    except (OSError, RuntimeError):
        return None


def files(config_plugins: dict | None) -> list[Path]:
    """The plugin files of the directory, by name: ``*.py``; not ``_private.py``, hidden
    ones or tests (``test_*.py``, ``*_test.py``, ``conftest.py``: a plugin's test can sit
    beside it)."""
    folder = where(config_plugins)
    if folder is None:
        return []
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no directory (the default is optional): no file plugins
        return []
    return sorted(Path(e.path) for e in entries
                  if e.name.endswith(".py") and not e.name.startswith(("_", ".", "test_"))
                  and not e.name.endswith("_test.py") and e.name != "conftest.py"
                  and e.is_file())


def found(config_plugins: dict | None, installed: dict[str, str | None]) -> list[FileFound]:
    """Each plugin file as a ``FileFound``; ``installed`` maps the entry points' names to
    their distributions, so that a file shadowing one is refused."""
    out = []
    paths = files(config_plugins)
    folder_unsafe = unsafe(paths[0].parent) if paths else None
    for path in paths:
        name = path.stem
        taken = None
        if name in installed:
            taken = installed[name] or "an installed plugin"
        out.append(FileFound(name, str(path), taken_by=taken,
                             refused=folder_unsafe or unsafe(path)))
    return out


def unsafe(path: Path) -> str | None:
    """Why orch will not run code from ``path``: someone but you could have written it (owned
    by another user, or writable by group or others). None where it is yours alone."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if not hasattr(os, "getuid"):
        return None  # no POSIX owners to compare (Windows)
    if st.st_uid != os.getuid():
        return (f"{path} belongs to another user (uid {st.st_uid}): not run; a plugin file "
                f"must be yours alone")
    if st.st_mode & 0o022:
        return (f"{path} is writable by group or others: not run; chmod go-w {path}")
    return None


def missing(config_plugins: dict | None) -> str | None:
    """A plugins folder named on purpose (flag, variable, config) that is no folder."""
    named = os.environ.get(ENV) or (config_plugins or {}).get("dir")
    if not named or not isinstance(named, str):
        return None
    folder = Path(named).expanduser()
    if folder.is_dir():
        return None
    where_set = ENV if os.environ.get(ENV) else "config plugins.dir"
    return f"the plugins folder {folder} ({where_set}) is not a folder: no file plugins load"


def clash(item: FileFound) -> str:
    """Why a file with an installed plugin's name is refused, and the fix."""
    return (f"the name {item.name!r} is taken by the installed plugin from "
            f"{item.taken_by}; rename {item.value} (a file cannot replace an installed "
            f"plugin: disable that one by name instead)")


def stamps(config_plugins: dict | None) -> dict:
    """What the file plugins are, for a cache key: the directory and each file's time and
    size (adding, removing or editing a file changes it)."""
    from orchestrator.plugin_host.remembered import stamp

    folder = where(config_plugins)
    return {"dir": str(folder) if folder is not None else None,
            "files": [[str(p), stamp(str(p))] for p in files(config_plugins)]}


def module_name(name: str) -> str:
    return _MODULE_PREFIX + re.sub(r"\W", "_", name)


def import_file(name: str, path: Path):
    """Import ``path`` as module ``orch_plugin_file_<name>``; the module already imported
    from the same unchanged file is returned again (one plugin object per process, as an
    installed module is). Call it only through the runner (plugins.import_plugin)."""
    import importlib.util

    from orchestrator.plugin_host.remembered import stamp

    module_id = module_name(name)
    held = stamp(str(path))
    if held is None:
        raise FileNotFoundError(f"plugin file {path} is gone")
    previous = sys.modules.get(module_id)
    if previous is not None and getattr(previous, "__file__", None) == str(path) and \
            getattr(previous, "__orch_stamp__", None) == held:
        return previous
    spec = importlib.util.spec_from_file_location(module_id, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_id] = module  # dataclasses and pickling look their module up
    try:
        spec.loader.exec_module(module)  # runner: called only inside import_plugin's worker
    except BaseException:
        sys.modules.pop(module_id, None)
        raise
    module.__orch_stamp__ = held
    return module


def from_argv(argv: list[str]) -> None:
    """``--plugins-dir DIR`` (or ``--plugins-dir=DIR``) before the command word, read before
    click parses: plugin commands and options are found before that."""
    for i, word in enumerate(argv):
        if not word.startswith("-"):
            return  # the command word: options after it are the command's own
        if word == FLAG and i + 1 < len(argv):
            os.environ[ENV] = argv[i + 1]
            return
        if word.startswith(FLAG + "="):
            os.environ[ENV] = word.split("=", 1)[1]
            return
