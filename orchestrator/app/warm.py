"""Start-up costs a face pays before it shows anything: litellm's import (seconds), before a
progress display starts or a long-lived server takes its first call."""

from __future__ import annotations


def import_litellm_quietly() -> None:
    """Pay litellm's import (seconds) before the progress display starts."""
    from orchestrator.runtime import litellm

    litellm()
