"""Files on disk: atomic JSON writes and append-only JSONL, so a killed process leaves valid files.

Every document passes through :func:`orchestrator.security.secrets.scrub_doc` on the way (registered
key values everywhere, key shapes in free-text fields only): no artifact ever holds a key
value, even one a model echoed. ``config.json`` opts out (``scrubber=None``): it holds names,
never values, and a shape scrubber would corrupt them."""

from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from orchestrator.security.secrets import scrub, scrub_doc


def write_json_atomic(path: Path, data: Any, *, scrubber: Any = scrub_doc) -> None:
    """Write JSON next to ``path`` and rename it into place: readers never see half a file."""
    if scrubber is not None:
        data = scrubber(data)
    tmp = _write_tmp(path, json.dumps(data, indent=2, default=str))
    _rename(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Free text (``briefing.md``, reports) scrubbed, written next to ``path`` and renamed."""
    _rename(_write_tmp(path, scrub(text), end=""), path)


def _write_tmp(path: Path, text: str, end: str = "\n") -> str:
    """``text`` (already scrubbed) in a new file next to ``path``; its name."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileNotFoundError:  # mkdir only when needed: a leg saves into its dir many times
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + end)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _rename(tmp: str, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


class BackgroundWriter:
    """Atomic JSON writes done on a worker thread, in order, from a text fixed at the call.

    A leg rewrites its metadata.json at every change of state. The file system's part of an
    atomic write (a new file, its data, a rename over the old one — on ext4 the rename first
    flushes the new file's data, auto_da_alloc) is most of its cost: ~0.5 ms of kernel time a
    write, during which the event loop, and every other leg, would stand still. So the call
    fixes the state as it is now (scrubbed, serialised) and a worker writes and renames it,
    holding no GIL while the kernel works. :meth:`drain` waits for pending writes and raises
    the first that failed. A write that would leave the file as it already is is skipped."""

    _pool: ThreadPoolExecutor | None = None

    def __init__(self) -> None:
        self._last: Future | None = None
        self._error: BaseException | None = None
        self._texts: dict[Path, str] = {}

    def write_json(self, path: Path, data: Any) -> None:
        text = json.dumps(scrub_doc(data), indent=2, default=str)
        if self._texts.get(path) == text:
            return
        self._texts[path] = text
        if BackgroundWriter._pool is None:
            BackgroundWriter._pool = ThreadPoolExecutor(4, thread_name_prefix="orch-write")
        self._last = self._pool.submit(self._write_after, self._last, text, path)

    def _write_after(self, previous: Future | None, text: str, path: Path) -> None:
        if previous is not None:  # submitted earlier to a FIFO pool: running or done
            wait([previous])
        try:
            _rename(_write_tmp(path, text), path)
        except BaseException as exc:
            self._texts.pop(path, None)  # not on disk: the next state is written again
            self._error = self._error or exc

    async def drain(self) -> None:
        last = self._last
        if last is not None and not last.done():
            import anyio

            await anyio.to_thread.run_sync(wait, [last])
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class JsonlFile:
    """An append-only JSONL file kept open by its one writer (a leg's conversation.jsonl):
    one open per leg rather than per line. Each line goes out whole in one write, so a killed
    process leaves every line it wrote, complete; a write that fails (a full disk) is cut
    back off, so the file never ends in half a line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def append(self, record: Any) -> None:
        line = (json.dumps(scrub_doc(record), default=str) + "\n").encode("utf-8")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(28, "No space left on device (short write)", str(self.path))
        except BaseException:
            try:
                os.ftruncate(self._fd, size)
            except OSError:
                pass
            raise

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
