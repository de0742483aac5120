"""Pieces the commands share: their ``--json`` output."""

from __future__ import annotations

import json
from typing import Any

import click


def print_json(doc: Any) -> None:
    """``--json`` output, scrubbed like the artifacts: CI logs keep it."""
    from orchestrator.security.secrets import scrub_doc

    click.echo(json.dumps(scrub_doc(doc), indent=2, default=str))
