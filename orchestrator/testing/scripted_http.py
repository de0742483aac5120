"""The scripted server's HTTP side: a threading server that can close every open connection,
and the handler that routes a request, applies the in-flight limit and the context window,
then sends the scripted reply (JSON, an error, SSE, a hang or a dropped socket)."""

from __future__ import annotations

import json
import math
import socket
import sys
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from orchestrator.testing.scripted_body import (
    completion,
    error_body,
    raw_body,
    retry_after_header,
    scripted_error,
)
from orchestrator.testing.scripted_reply import (
    RecordedRequest,
    Reply,
    estimate_prompt_tokens,
    model_key,
)
from orchestrator.testing.scripted_sse import stream_events, streamable


class ScriptedServer(Protocol):
    """What the handler asks of the server that owns it (``scripted_server.ScriptedServer``),
    named here so the server imports its HTTP side and not the reverse."""

    latency: float
    stopping: threading.Event
    models_key: str | None

    def models(self) -> list[str]: ...

    def record(self, key: str, body: dict[str, Any], headers: Iterable[tuple[str, str]],
               path: str) -> RecordedRequest: ...

    def enter(self) -> None: ...

    def leave(self) -> None: ...

    def over_limit(self) -> float | None: ...

    def window_of(self, key: str) -> int | None: ...

    def next_reply(self, key: str, body: dict[str, Any]) -> Reply: ...

    def next_id(self) -> int: ...

CHAT_PATH = "/v1/chat/completions"


class Aborted(Exception):
    """The server is stopping: leave without answering."""


class HTTPServer(ThreadingHTTPServer):
    """The listening socket, its handler threads and the connections they hold."""

    # The default backlog of 5 silently drops connections under a burst of parallel legs.
    request_queue_size = 256
    daemon_threads = True
    # Idle keep-alive connections would make server_close() join forever; stop() closes them.
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: ScriptedServer):
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, Handler)

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if self.owner.stopping.is_set() or isinstance(exc, OSError):
            return  # a client went away, or stop() closed the socket under us
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    """One connection's requests: ``/health``, ``/v1/models`` and chat completions."""

    protocol_version = "HTTP/1.1"  # keep-alive: litellm's aiohttp pool reuses connections
    server_version = "orch-scripted/1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: HTTPServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.connections_lock:
                self.server.connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    # --- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", headers)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _record(self, key: str, body: dict[str, Any]):
        return self.server.owner.record(key, body, self.headers.items(), self.path)

    # --- routes ---------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        rec = self._record("", {})
        if path == "/health":
            status, obj = 200, {"status": "ok"}
        elif path == "/v1/models" and owner.models_key and \
                self.headers.get("Authorization") != f"Bearer {owner.models_key}":
            status, obj = 401, error_body("Incorrect API key provided.",
                                          "invalid_request_error", "invalid_api_key")
        elif path == "/v1/models":
            status, obj = 200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                for m in owner.models()]}
        else:
            status, obj = 404, error_body(f"Unknown path {path}", "invalid_request_error", None)
        self._send_json(status, obj)
        rec.finish(status)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0].rstrip("/")
        raw = self._read_body()
        owner = self.server.owner
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            rec = self._record("", {"_raw": raw.decode("utf-8", "replace")})
            self._send_json(400, error_body(f"Invalid JSON body: {exc}",
                                            "invalid_request_error", None))
            rec.finish(400)
            return
        if path != CHAT_PATH:
            rec = self._record("", body)
            self._send_json(404, error_body(f"Unknown path {path}", "invalid_request_error",
                                            None))
            rec.finish(404)
            return
        key = model_key(str(body.get("model") or ""))
        rec = self._record(key, body)
        status: int | None = None
        owner.enter()
        try:
            status = self._chat(owner, key, body)
        except Aborted:
            self._drop()
        finally:
            owner.leave()
            rec.finish(status)

    # --- chat completions -----------------------------------------------------------------

    def _chat(self, owner: ScriptedServer, key: str, body: dict[str, Any]) -> int | None:
        """Answer one chat completion; return the status sent (None when dropped)."""
        limited = owner.over_limit()
        if limited is not None:
            retry = retry_after_header(limited)
            self._send_json(429, error_body(
                f"Rate limit reached for requests on {key}: too many requests in flight. "
                f"Please try again in {retry}s.", "requests", "rate_limit_exceeded"),
                {"Retry-After": retry})
            return 429
        prompt_tokens = estimate_prompt_tokens(body)
        window = owner.window_of(key)
        if window is not None:
            completion_tokens = int(body.get("max_completion_tokens") or
                                    body.get("max_tokens") or 0)
            total = prompt_tokens + completion_tokens
            if total > window:
                self._send_json(400, error_body(
                    f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {total} tokens ({prompt_tokens} in the messages, "
                    f"{completion_tokens} in the completion). Please reduce the length of "
                    "the messages or completion.", "invalid_request_error",
                    "context_length_exceeded"))
                return 400
        try:
            reply = owner.next_reply(key, body)
        except Exception as exc:  # a broken reply function: say so loudly, as a 500
            self._send_json(500, error_body(f"scripted reply failed: {exc!r}", "server_error",
                                            None))
            return 500
        self._wait(owner.latency + reply.latency)
        if reply.hang:
            self._wait(math.inf)
        if reply.drop:
            self._drop()
            return None
        headers = dict(reply.headers or {})
        if reply.retry_after is not None:
            headers["Retry-After"] = retry_after_header(reply.retry_after)
        if reply.status != 200 and reply.error_body is not None:  # a provider's own shape
            self._send_json(reply.status, reply.error_body, headers)
            return reply.status
        if reply.status != 200:
            self._send_json(reply.status, scripted_error(reply), headers)
            return reply.status
        streams = bool(body.get("stream")) and not reply.ignores_stream
        if reply.body is not None and streams and streamable(reply.body):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(reply.body, include_usage, headers, reply.chunk_delay)
            return 200
        if reply.body is not None:
            self._send(200, raw_body(reply), "application/json", headers)
            return 200
        doc = completion(owner.next_id(), key, body, reply, prompt_tokens)
        if streams:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(doc, include_usage, headers, reply.chunk_delay)
        else:
            self._send_json(200, doc, headers)
        return 200

    def _wait(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.server.owner.stopping.wait(None if math.isinf(seconds) else seconds):
            raise Aborted

    def _stream(self, doc: dict[str, Any], include_usage: bool,
                headers: dict[str, str], delay: float = 0.0) -> None:
        """Server-sent events in chunked transfer encoding, as OpenAI streams them; each
        chunk flushed, ``delay`` seconds apart (text that arrives while the leg runs)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for i, event in enumerate(stream_events(doc, include_usage)):
            if i and delay:
                self.wfile.flush()
                self._wait(delay)
            data = f"data: {event}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")
