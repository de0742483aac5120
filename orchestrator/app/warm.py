"""Start-up costs a face pays before it shows anything: litellm's import (seconds), before a
progress display starts or a long-lived server takes its first call, or meanwhile."""

from __future__ import annotations


def import_litellm_quietly() -> None:
    """Pay litellm's import (seconds) before the progress display starts."""
    from orchestrator.runtime import litellm

    litellm()


def import_litellm_meanwhile() -> None:
    """Start litellm's import (seconds; half a minute on a busy machine) on a thread and
    return at once: the run starts meanwhile — its first lines said, the local model server
    started (plugins/local.py's wave_start) — and whatever needs litellm first waits for this
    one import (``runtime.litellm`` is one import under a lock)."""
    import threading

    from orchestrator import runtime

    if runtime._litellm_module is not None:
        return
    threading.Thread(target=_import, name="orch-litellm-import", daemon=True).start()


def _import() -> None:
    from orchestrator.runtime import litellm

    try:
        litellm()
    except Exception:  # said again, with its cause, by whoever needs it next
        pass
