"""Where the local model's big files live: the platform data directory, not ``ORCH_HOME``.

``ORCH_HOME`` holds config, the ledger and runs — small things people sync and back up. The
253 MB GGUF and the ~10 MB ``llama-server`` binary belong in ``platformdirs.user_data_dir``
(``~/.local/share/orch`` on Linux), or ``ORCH_DATA_HOME`` when set. A model file an older orch
left in ``ORCH_HOME/local/models`` is moved here once, and the move is said.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from orchestrator.config import home


def data_dir() -> Path:
    env = os.environ.get("ORCH_DATA_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("orch", appauthor=False))


def models_dir() -> Path:
    return data_dir() / "models"


def old_models_dir() -> Path:
    """Where orch kept the built-in GGUF before it moved to the data directory."""
    return home() / "local" / "models"


def migrate(name: str) -> str | None:
    """Move ``name`` from the old models directory to the new one, once: a notice saying so,
    or None when there is nothing to move (or the new place already has a file).
    A copy across file systems goes through a partial file, so a kill leaves no half model."""
    old, new = old_models_dir() / name, models_dir() / name
    if not old.is_file() or new.exists() or old.resolve() == new.resolve():
        return None
    new.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(old, new)
    except OSError:
        partial = new.with_name(f".{name}.{os.getpid()}.partial")
        try:
            shutil.copy2(old, partial)
            os.replace(partial, new)
        finally:
            partial.unlink(missing_ok=True)
        old.unlink()
    return (f"moved the local model {old} to {new} (the platform data directory; "
            "ORCH_DATA_HOME overrides it), so config backups no longer carry it")
