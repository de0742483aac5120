"""``orch local build``: llama.cpp's ``llama-server``, compiled once, portably, and cached.

The source is the llama.cpp tree vendored inside the pinned ``llama-cpp-python`` sdist (pip
downloads it, or serves it from its cache; its sha256 is pinned here). The build is portable
(``GGML_NATIVE=OFF``): the x86-64 baseline llama.cpp then enables — SSE4.2, AVX, AVX2, FMA,
F16C, BMI2, no AVX-512, no AMX — so a binary built on one CPU runs on another of the last
decade, and no instruction the CPU merely advertises is ever used. 10–45 minutes on 2 cores
depending on load; afterwards the binary is reused from ``DATA_DIR/llama-server/<version>/``.

Optional: orch serves the model with the prebuilt server (``xllamacpp``) without it. One build
at a time (``DATA_DIR/build.lock``): a second ``orch local build`` is refused in one line
rather than delete the first one's work directory under it. The log is written line by line,
and progress comes with an estimate of the time left, measured from the steps done.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from orchestrator.errors import OrchError
from orchestrator.local.data import data_dir
from orchestrator.local.model import sha256_file

SDIST_NAME, SDIST_VERSION = "llama-cpp-python", "0.3.36"
SDIST_FILE = f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
VENDORED = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp"
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DGGML_CCACHE=OFF",
]
ESTIMATE = "10–45 minutes on 2 cores depending on load"
BUILD_HINT = f"run `orch local build` ({ESTIMATE}, once)"
_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def install_dir() -> Path:
    return data_dir() / "llama-server" / SDIST_VERSION


def binary() -> Path:
    return install_dir() / "llama-server"


def stamp_path() -> Path:
    return install_dir() / "build.json"


def built() -> dict | None:
    """The stamp of a finished build whose binary is still there, else None."""
    try:
        stamp = json.loads(stamp_path().read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if stamp.get("flags") != CMAKE_FLAGS or not os.access(binary(), os.X_OK):
        return None
    return stamp


def build(*, force: bool = False, jobs: int | None = None,
          say: Callable[[str], None] = print) -> dict:
    """Build and install ``llama-server`` unless a finished build is there (``force``
    rebuilds). Returns the stamp: version, flags, seconds, where."""
    if not force and (stamp := built()) is not None:
        return {**stamp, "cached": True}
    with _one_build():
        if not force and (stamp := built()) is not None:  # built while we looked
            return {**stamp, "cached": True}
        return _build(jobs, say)


@contextlib.contextmanager
def _one_build() -> Iterator[None]:
    """The build lock: held for the whole build; a second build is refused at once."""
    lock = data_dir() / "build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise OrchError(f"another `orch local build` is running ({holder}); wait for it "
                            "to finish, then run this again: it finds the build cached") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}")
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(jobs: int | None, say: Callable[[str], None]) -> dict:
    cmake, compiler = _tools()
    t0 = time.monotonic()
    work = data_dir() / "build"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = data_dir() / "build.log"
    try:
        source = _source(work, log, say)
        say(f"configuring llama.cpp ({' '.join(f for f in CMAKE_FLAGS if 'NATIVE' in f)}; "
            f"compiler {compiler})")
        _run([cmake, "-S", str(source), "-B", str(work / "out"), *_generator(), *CMAKE_FLAGS],
             log, "cmake could not configure llama.cpp")
        jobs = jobs or os.cpu_count() or 1
        say(f"compiling llama-server with {jobs} jobs: {ESTIMATE} (the log, line by line: "
            f"{log})")
        _run([cmake, "--build", str(work / "out"), "--target", "llama-server", "-j", str(jobs)],
             log, "compiling llama-server failed", progress=say)
        made = work / "out" / "bin" / "llama-server"
        install_dir().mkdir(parents=True, exist_ok=True)
        partial = install_dir() / f".llama-server.{os.getpid()}.partial"
        shutil.copy2(made, partial)
        os.replace(partial, binary())
        _run([str(binary()), "--version"], log, "the built llama-server does not run")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stamp = {"version": SDIST_VERSION, "source": f"{SDIST_NAME}=={SDIST_VERSION} sdist "
             f"(vendor/llama.cpp)", "flags": CMAKE_FLAGS, "binary": str(binary()),
             "seconds": round(time.monotonic() - t0, 1), "built_at": time.strftime(
                 "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    stamp_path().write_text(json.dumps(stamp, indent=2), encoding="utf-8")
    return {**stamp, "cached": False}


def _tools() -> tuple[str, str]:
    here = Path(sys.executable).parent
    cmake = shutil.which("cmake", path=f"{here}{os.pathsep}{os.environ.get('PATH', '')}")
    if cmake is None:
        raise OrchError("building the local server needs cmake: pip install -e '.[local]' "
                        "installs it (or apt-get install cmake)")
    compiler = os.environ.get("CXX") or next(
        (c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if compiler is None:
        raise OrchError("building the local server needs a C++ compiler: apt-get install g++ "
                        "(or build-essential), then run `orch local build` again")
    return cmake, compiler


def _generator() -> list[str]:
    here = Path(sys.executable).parent
    found = shutil.which("ninja", path=f"{here}{os.pathsep}{os.environ.get('PATH', '')}")
    return ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={found}"] if found else []


def _source(work: Path, log: Path, say: Callable[[str], None]) -> Path:
    """The vendored llama.cpp tree, from the pinned sdist (pip's cache serves it again)."""
    say(f"fetching the {SDIST_NAME}=={SDIST_VERSION} sdist with pip (pip's cache serves a "
        "second fetch)")
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", SDIST_NAME,
              "--disable-pip-version-check", "-d", tmp, f"{SDIST_NAME}=={SDIST_VERSION}"],
             log, f"pip could not download the {SDIST_NAME} sdist")
        sdist = Path(tmp) / SDIST_FILE
        if not sdist.is_file():
            raise OrchError(f"pip did not fetch {SDIST_FILE} (see {log}); check the package "
                            "index settings")
        actual = sha256_file(sdist)
        if actual != SDIST_SHA256:
            raise OrchError(f"{SDIST_FILE} fails its pinned sha256 (got {actual[:12]}…, "
                            f"pinned {SDIST_SHA256[:12]}…); the index served another file")
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(VENDORED + "/")]
            tar.extractall(work / "src", members=members, filter="data")
    return work / "src" / VENDORED


def _run(argv: list[str], log: Path, what: str, progress=None) -> None:
    """Run ``argv`` with its output appended to ``log``; ``progress`` hears every tenth of a
    ninja build. A failure is one line naming the log."""
    with open(log, "a", encoding="utf-8", buffering=1) as out:  # line by line: tail -f works
        out.write(f"$ {' '.join(argv)}\n")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        said, t0 = 0, time.monotonic()
        for line in proc.stdout:
            out.write(line)
            step = _STEP.match(line)
            if progress and step:
                done, total = int(step[1]), int(step[2])
                if done * 20 // total > said:
                    said = done * 20 // total
                    progress(f"  {done}/{total} compiled{eta(time.monotonic() - t0, done, total)}")
        code = proc.wait()
    if code != 0:
        raise OrchError(f"{what} (exit code {code}); the output is in {log}")


def eta(elapsed_s: float, done: int, total: int) -> str:
    """``· about N min left``, from the pace of the steps done so far."""
    if done <= 0 or done >= total:
        return ""
    left = elapsed_s / done * (total - done)
    return f" · about {max(1, round(left / 60))} min left"
