"""Shell completion values: model names, aliases, councils, run ids, providers, local models.

Read from files only — config.json, the ``orch models`` cache, the runs folder, litellm's
bundled price list as JSON — so a TAB never imports litellm. Attached to the commands'
parameters by name when the shell asks (``_ORCH_COMPLETE`` set), so no command module names
its completer and a new command gets them by naming its parameters like the others.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import click
from click.shell_completion import CompletionItem

from orchestrator import config as config_mod

ENV_VAR = "_ORCH_COMPLETE"


def _config() -> config_mod.Config | None:
    try:
        return config_mod.Config.load()
    except Exception:  # a broken config completes nothing rather than failing the shell
        return None


def _section(name: str) -> dict:
    cfg = _config()
    value = cfg.data.get(name) if cfg else None
    return value if isinstance(value, dict) else {}


def aliases() -> list[str]:
    return sorted(_section("aliases"))


def councils() -> list[str]:
    return sorted(_section("councils"))


def providers() -> list[str]:
    return sorted(_section("providers"))


def local_aliases() -> list[str]:
    models = _section("local").get("models")
    return sorted({"gemma3-270m", *(models if isinstance(models, dict) else {})})


def _litellm_names() -> list[str]:
    """Catalogue names for providers whose key is set, from litellm's bundled JSON."""
    import importlib.util

    from orchestrator import keys
    from orchestrator.models.listing import KEYED_PROVIDERS

    keyed = {p for p, names in KEYED_PROVIDERS.items() if any(keys.is_set(n) for n in names)}
    spec = importlib.util.find_spec("litellm") if keyed else None
    if not spec or not spec.submodule_search_locations:
        return []
    path = os.path.join(spec.submodule_search_locations[0],
                        "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as fh:
            cost = json.load(fh)
    except (OSError, ValueError):
        return []
    return [key if key.startswith(f"{p}/") else f"{p}/{key}" for key, info in cost.items()
            if isinstance(info, dict) and (p := info.get("litellm_provider")) in keyed
            and info.get("mode") == "chat"]


def models() -> list[str]:
    names = set(aliases()) | {f"{p}/" for p in providers()}
    names |= {f"local/{a}" for a in local_aliases()}
    try:
        from orchestrator.models.listing import cache_path

        cache = json.loads(cache_path().read_text())
        names |= {f"{pid}/{m}" for pid, hit in cache.items() if pid in providers()
                  for m in hit.get("models") or []}
    except (OSError, ValueError, AttributeError):
        pass
    return sorted(names | set(_litellm_names()))


def run_ids() -> list[str]:
    runs_dir = config_mod.runs_dir()
    if not runs_dir.is_dir():
        return []
    found = []
    for entry in runs_dir.iterdir():
        if (entry / "wave.json").exists():
            found.append(entry.name)
        elif (entry / "run.json").exists():
            found.append(entry.name.split("-", 1)[1])
    return sorted(found, reverse=True)  # newest first: ids start with the date


def plugin_names() -> list[str]:
    from importlib import metadata

    return sorted({ep.name for ep in metadata.entry_points(group="orch")})


def _items(source: Callable[[], list[str]], comma: bool = False):
    def complete(ctx, param, incomplete: str) -> list[CompletionItem]:
        head, sep, last = incomplete.rpartition(",") if comma else ("", "", incomplete)
        prefix = head + sep
        return [CompletionItem(prefix + name) for name in source()
                if name.startswith(last)]
    return complete


# (command path, parameter name) first, then the parameter name alone.
BY_NAME: dict[str, Callable] = {
    "models": _items(models, comma=True), "models_text": _items(models, comma=True),
    "chair": _items(models), "model_name": _items(models), "model": _items(models),
    "council": _items(councils), "council_name": _items(councils),
    "wave_id": _items(run_ids), "run_id": _items(run_ids), "retry_failed": _items(run_ids),
    "plugin_name": _items(plugin_names),
}
BY_PATH: dict[tuple[str, str], Callable] = {
    ("alias remove", "name"): _items(aliases),
    ("council remove", "name"): _items(councils),
    ("council save", "name"): _items(councils),
    ("provider remove", "provider_id"): _items(providers),
    ("provider add", "provider_id"): _items(providers),
    ("local remove", "alias"): _items(local_aliases),
}


def install(command: click.Command, path: str = "") -> click.Command:
    """Attach the completers above to ``command``'s parameters (and its subcommands')."""
    here = f"{path} {command.name}".strip()
    for param in command.params:
        completer = BY_PATH.get((here, param.name or "")) or BY_NAME.get(param.name or "")
        if completer and getattr(param, "_custom_shell_complete", None) is None:
            param._custom_shell_complete = completer
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            install(sub, here)
    return command


def completing() -> bool:
    return ENV_VAR in os.environ
