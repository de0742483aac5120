"""Which llama.cpp server orch runs, and on the portable path.

By default the prebuilt one: ``xllamacpp``, llama.cpp's own server as a Python extension with
manylinux CPU wheels on PyPI, installed by the ``local`` extra, so a fresh machine serves the
model after ``pip install`` with no compile step (:mod:`orchestrator.local.prebuilt`). A
``llama-server`` compiled by ``orch local build`` runs instead when ``local.server`` is
``"built"``, or when xllamacpp is not installed; when both are there, the compiled one is the
portable path's server (a start that died of SIGILL tries it, repacking off). Both take the
same flags (:func:`llama_server.argv`).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import OrchError
from orchestrator.local import build
from orchestrator.local.llama_server import PREBUILT
from orchestrator.local.model import installed
from orchestrator.local.prebuilt import PACKAGE

AUTO, PREBUILT_NAME, BUILT = "auto", "prebuilt", "built"
CHOICES = (AUTO, PREBUILT_NAME, BUILT)
MISSING = ("the local server needs xllamacpp (llama.cpp's server, prebuilt): "
           "pip install -e '.[local]' installs it")


@dataclass(frozen=True)
class Choice:
    fast: list[str]  # the program (argv prefix) on the fast path
    portable: list[str]  # and on the portable path
    label: str
    portable_label: str


def _prebuilt_label() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"prebuilt ({PACKAGE} {version(PACKAGE)})"
    except PackageNotFoundError:
        return f"prebuilt ({PACKAGE})"


def choose(server: str = AUTO) -> Choice:
    """The programs for ``local.server``; a one-line error naming the fix when none is there."""
    stamp = build.built()
    built = ([str(build.binary())], f"llama-server {build.SDIST_VERSION} (orch local build)")
    if server == BUILT or (server == AUTO and not installed(PACKAGE) and stamp):
        if stamp is None:
            raise OrchError(f"`local.server` is \"built\" and the local server is not built "
                            f"yet: {build.BUILD_HINT}, or remove `local.server` to use the "
                            "prebuilt one")
        return Choice(built[0], built[0], built[1], built[1])
    if not installed(PACKAGE):
        raise OrchError(MISSING)
    prebuilt = (list(PREBUILT), _prebuilt_label())
    portable = built if stamp else prebuilt
    return Choice(prebuilt[0], portable[0], prebuilt[1], portable[1])
