"""The wire between an orch client and its daemon: JSON messages, each prefixed by its
length (4 bytes, big-endian). One connection carries one hello and then one job (or one
control request). Standard library only."""

from __future__ import annotations

import json
import socket
import struct
import threading

MAX_FRAME = 64 * 1024 * 1024  # a wave document is far smaller; past this the peer is broken


class Closed(Exception):  # noqa: N818 - the peer went away, not a bug
    """The other end closed the connection (or died)."""


class Channel:
    """Framed JSON messages over a connected Unix socket; sends are thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("utf-8", "surrogatepass")
        try:
            with self._send_lock:
                self.sock.sendall(struct.pack(">I", len(data)) + data)
        except OSError as exc:
            raise Closed(str(exc)) from None

    def recv(self) -> dict:
        size = struct.unpack(">I", self._read(4))[0]
        if size > MAX_FRAME:
            raise Closed(f"a frame of {size} bytes")
        return json.loads(self._read(size).decode("utf-8", "surrogatepass"))

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            try:
                chunk = self.sock.recv(min(left, 1 << 20))
            except OSError as exc:
                raise Closed(str(exc)) from None
            if not chunk:
                raise Closed("end of stream")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def connect(path, timeout: float | None = 5.0) -> Channel:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    return Channel(sock)
