"""The config directory (``ORCH_HOME``) and its ``config.json``: providers, aliases, councils."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError, UsageProblem

SECTIONS = ("providers", "aliases", "councils", "variants", "plugins", "plugin_config", "defaults",
            "local", "serve")
SETTINGS = ("daemon",)  # top-level values that are not sections


def home() -> Path:
    """Where orch keeps config, ledger and runs: ``ORCH_HOME``, else the user's config home."""
    env = os.environ.get("ORCH_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "orch"


def unwritable(directory: Path, exc: OSError) -> OrchError:
    """One line for a directory orch must write to and cannot: which one, why, the fix."""
    why = exc.strerror or str(exc)
    try:
        under_home = Path(directory).resolve().is_relative_to(home().resolve())
    except OSError:
        under_home = False
    fix = ("set ORCH_HOME to a writable directory" if under_home else
           "pass a writable --runs-dir (or ORCH_RUNS_DIR)")
    return OrchError(f"cannot write to {directory} ({why}); make it writable "
                     f"(chmod u+w {directory}) or {fix}")


def runs_dir() -> Path:
    env = os.environ.get("ORCH_RUNS_DIR")
    return Path(env).expanduser() if env else home() / "runs"


@dataclass
class Config:
    """The parsed ``config.json``; every section is a plain dict so plugins can read their own."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None, *, validate: bool = True) -> Config:
        """``validate=False`` is for ``orch doctor``, which reports every problem, not the first."""
        path = path or home() / "config.json"
        data: dict[str, Any] = {}
        if path.exists():
            try:
                data = json.loads(path.read_bytes().decode("utf-8") or "{}")
            except UnicodeDecodeError as exc:
                raise OrchError(
                    f"config file {path} is not valid UTF-8 (byte {exc.object[exc.start]:#04x} "
                    f"at offset {exc.start}); fix its encoding or remove it") from None
            except OSError as exc:
                raise OrchError(f"cannot read config file {path} ({exc.strerror or exc}); "
                                "fix its permissions or set ORCH_HOME") from None
            except json.JSONDecodeError as exc:
                raise OrchError(
                    f"config file {path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                    "fix or remove it"
                ) from None
            if not isinstance(data, dict):
                raise OrchError(f"config file {path} must hold a JSON object; fix or remove it")
            if validate:
                from orchestrator.config_schema import validate as check

                check(data, path)
                _check_names(data, path)
        for name in SECTIONS:
            data.setdefault(name, {})
        _register_url_credentials(data)
        return cls(path=path, data=data)

    def save(self) -> None:
        # names, never values: never through the shape scrubber (it would corrupt them)
        from orchestrator.store import write_json_atomic  # not on the daemon client's path

        try:
            write_json_atomic(self.path, {k: v for k, v in self.data.items() if v != {}},
                              scrubber=None)
        except OSError as exc:
            raise unwritable(self.path.parent, exc) from None

    def section(self, name: str) -> dict[str, Any]:
        return self.data.setdefault(name, {})

    def remove(self, section: str, name: str, noun: str, listed: str) -> None:
        """Delete ``name`` from ``section`` and save, or say which names there are."""
        entries = self.section(section)
        if name not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise UsageProblem(f"no {noun} {name!r} ({listed}: {known})")
        del entries[name]
        self.save()

    @property
    def providers(self) -> dict[str, dict[str, Any]]:
        return self.section("providers")

    @property
    def aliases(self) -> dict[str, str]:
        return self.section("aliases")

    @property
    def councils(self) -> dict[str, list[str]]:
        return self.section("councils")

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        return self.section("variants")

    def plugin_config(self, plugin: str) -> dict[str, Any]:
        """A plugin's own section, ``plugin_config.<name>`` in config.json."""
        return self.section("plugin_config").get(plugin, {})

    @property
    def defaults(self) -> dict[str, Any]:
        return self.section("defaults")


def _check_names(data: dict[str, Any], path: Path) -> None:
    """The rules for names (reserved provider ids, model-name characters;
    models/names.py), where config.json is read: the first problem in one line."""
    from orchestrator.models.names import config_problems

    problems = config_problems(data)
    if problems:
        where, problem, fix = problems[0]
        raise OrchError(f"config file {path}: {where}: {problem}; {fix}")


def _register_url_credentials(data: dict[str, Any]) -> None:
    """A hand-edited ``base_url`` with ``user:pass@`` or ``?key=``: its credentials are
    secrets from the moment config.json is read, so no output (a listing, doctor, an error)
    shows them."""
    from orchestrator.security.secrets import register_url

    providers = data.get("providers")
    for entry in providers.values() if isinstance(providers, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("base_url"), str):
            register_url(entry["base_url"])
