"""Each plugin's ``plugin_config.<name>`` section checked against the schema the plugin
declares: a module-level ``CONFIG_SCHEMA`` (the JSON-Schema subset of
:mod:`orchestrator.config_schema`: type, properties, minimum, exclusiveMinimum, items).

``output_budget.tokens: -5`` was sent as ``max_tokens: -5`` and ``tokens: 0`` silently meant
no budget, while ``orch doctor`` said the config was valid. Checked here, a bad value stops
``orch fanout`` / ``orch council run`` before any request with one line (exit 2), and is
a ``fail`` row
in ``orch doctor``. A plugin that declares no schema is not checked (its own code may be)."""

from __future__ import annotations

from orchestrator.config_schema import first_problem
from orchestrator.errors import OrchError


def problems(cfg, pm) -> list[tuple[str, str]]:
    """(plugin name, one line) for each loaded plugin whose section breaks its schema (the
    ``CONFIG_SCHEMA`` read when it was loaded, through the runner: snapshot.py)."""
    found = []
    sections = cfg.section("plugin_config")
    for name in sorted(sections):
        if not pm.loaded(name):
            continue
        schema = pm.declared(name).config_schema
        if schema is None:
            continue
        problem = first_problem(sections[name], schema, f"plugin_config.{name}")
        if problem is not None:
            where, message = problem
            found.append((name, f"{where} {message}"))
    return found


class BadPluginConfig(OrchError):
    """A plugin setting its schema refuses: refused before any spend (exit 2), like a budget
    the output_budget pre-flight refuses."""

    exit_code = 2


def check_plugin_config(cfg, pm) -> None:
    """Raise a one-line error naming the first bad plugin setting, before any spend."""
    for _name, line in problems(cfg, pm):
        raise BadPluginConfig(f"config file {cfg.path}: {line}; fix it (or remove the key)")
