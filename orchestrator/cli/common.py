"""Pieces the wave-running commands share: model resolution through plugins, output."""

from __future__ import annotations

import json
from typing import Any

import click

from orchestrator import models
from orchestrator.config import Config
from orchestrator.errors import OrchError
from orchestrator.hooks import HookRunner


def resolver(pm):
    """The ``resolve_model`` hook as a plain function (None when no plugin claims a name)."""
    runner = HookRunner(pm)

    def on_error(plugin: str, hook: str, exc: BaseException) -> None:
        raise OrchError(f"plugin {plugin} failed to resolve a model: {exc}")

    return lambda spec, config: runner.first("resolve_model", on_error, spec=spec,
                                             config=config)


def resolve_all(specs: list[str], config: Config, pm) -> list[models.ResolvedModel]:
    resolve = resolver(pm)
    return [models.resolve(s, config, plugin_resolver=resolve) for s in specs]


def print_json(doc: Any) -> None:
    """``--json`` output, scrubbed like the artifacts: CI logs keep it."""
    from orchestrator.secrets import scrub_doc

    click.echo(json.dumps(scrub_doc(doc), indent=2, default=str))


def import_litellm_quietly() -> None:
    """Pay litellm's import (seconds) before the progress display starts."""
    from orchestrator.runtime import litellm

    litellm()
