"""Pieces the wave-running commands share: model resolution (from ``orchestrator.resolve``), output."""

from __future__ import annotations

import json
from typing import Any

import click

# Resolution is the core's (doctor and the model list use it too); the commands import it here.
from orchestrator.resolve import resolve_all as resolve_all


def print_json(doc: Any) -> None:
    """``--json`` output, scrubbed like the artifacts: CI logs keep it."""
    from orchestrator.secrets import scrub_doc

    click.echo(json.dumps(scrub_doc(doc), indent=2, default=str))


def import_litellm_quietly() -> None:
    """Pay litellm's import (seconds) before the progress display starts."""
    from orchestrator.runtime import litellm

    litellm()
