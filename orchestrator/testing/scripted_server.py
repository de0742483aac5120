"""A scripted OpenAI-compatible server on 127.0.0.1, for tests and plugin authors.

It speaks real HTTP so requests travel the same road as a provider's: litellm, its aiohttp
connection pool, its exception mapping. Each model gets a script of replies (text, tool
calls, usage, latency, HTTP errors, hangs, dropped sockets); every request is recorded.

Stdlib only, so importing it costs nothing::

    with ScriptedServer() as srv:
        srv.script("m", Reply(text="hi"), Reply(status=429, retry_after=2))
        litellm.completion(model="openai/m", api_base=srv.url, api_key="sk-test", ...)

Run ``python -m orchestrator.testing.scripted_server --help`` for the benchmark CLI.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "Reply", "ScriptedServer", "estimate_prompt_tokens"]

CHAT_PATH = "/v1/chat/completions"

# Default error bodies, shaped like OpenAI's so litellm maps them to the right exception.
_ERROR_DEFAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: ("The model does not exist or you do not have access to it.",
          "invalid_request_error", "model_not_found"),
    429: ("Rate limit reached for requests. Please try again later.", "requests",
          "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
    502: ("Bad gateway.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}
_QUOTA_MESSAGE = ("You exceeded your current quota, please check your plan and billing "
                  "details.")


@dataclass
class Reply:
    """One scripted answer. Anything not 200 is sent as an OpenAI-style error body.

    ``usage`` may be partial: missing counts are estimated (prompt: request chars / 4,
    completion: reply chars / 4). ``cached_tokens`` and ``reasoning_tokens`` keys land in
    ``prompt_tokens_details`` / ``completion_tokens_details``.
    """

    text: str = "ok"
    tool_calls: list[dict[str, Any]] | None = None  # {"name", "arguments": dict|str, "id"?}
    usage: dict[str, int] | None = None
    finish_reason: str | None = None  # default "stop", or "tool_calls" when tool_calls
    latency: float = 0.0  # seconds before answering (added to the server's base latency)
    status: int = 200
    error_message: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    retry_after: float | None = None  # sent as a Retry-After header
    hang: bool = False  # never answer; released (connection closed) when the server stops
    drop: bool = False  # close the socket without answering
    reasoning: str | None = None  # message.reasoning_content
    headers: dict[str, str] | None = None  # extra response headers
    no_usage: bool = False  # leave ``usage`` out of the response (a provider that omits it)
    error_body: dict[str, Any] | None = None  # an error status sent with exactly this body
    # sent instead of the completion, for malformed replies: a dict or list goes as JSON
    # (e.g. {"choices": []}), str or bytes as they are (a garbage body)
    body: Any = None

    @classmethod
    def coerce(cls, value: Reply | dict[str, Any] | str) -> Reply:
        """A Reply from a Reply, a dict with Reply's keys, or a bare string (the text)."""
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if isinstance(value, dict):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise ValueError(f"unknown Reply keys: {sorted(unknown)}")
            return cls(**value)
        raise TypeError(f"cannot make a Reply from {type(value).__name__}")


# A dynamic reply: called with the request body and the model's 0-based request number.
ReplyFn = Callable[[dict[str, Any], int], "Reply | dict[str, Any] | str"]


@dataclass
class RecordedRequest:
    """One request as the server saw it. Times are ``time.monotonic()``; headers lower-cased."""

    model: str  # request body's model, ``openai/`` prefix stripped ("" when not a chat call)
    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    t_start: float
    t_end: float | None = None  # None while in flight (or hanging)
    status: int | None = None  # None when dropped or never answered

    @property
    def duration(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_start


def model_key(model: str) -> str:
    """Scripts match on the model name without the ``openai/`` litellm routing prefix."""
    return model.removeprefix("openai/")


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """Rough prompt size the server uses for usage and windows: JSON chars of messages+tools / 4."""
    chars = len(json.dumps(body.get("messages") or []))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return math.ceil(chars / 4)


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _retry_after_header(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


class _Aborted(Exception):
    """The server is stopping: leave without answering."""


class _HTTPServer(ThreadingHTTPServer):
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
        super().__init__(address, _Handler)

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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: litellm's aiohttp pool reuses connections
    server_version = "orch-scripted/1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: _HTTPServer

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

    # --- routes ---------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        rec = owner._record(self, "", {})
        if path == "/health":
            status, obj = 200, {"status": "ok"}
        elif path == "/v1/models":
            status, obj = 200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                for m in owner.models()]}
        else:
            status, obj = 404, _error_body(f"Unknown path {path}", "invalid_request_error", None)
        self._send_json(status, obj)
        owner._finish(rec, status)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0].rstrip("/")
        raw = self._read_body()
        owner = self.server.owner
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            rec = owner._record(self, "", {"_raw": raw.decode("utf-8", "replace")})
            self._send_json(400, _error_body(f"Invalid JSON body: {exc}",
                                             "invalid_request_error", None))
            owner._finish(rec, 400)
            return
        if path != CHAT_PATH:
            rec = owner._record(self, "", body)
            self._send_json(404, _error_body(f"Unknown path {path}", "invalid_request_error",
                                             None))
            owner._finish(rec, 404)
            return
        key = model_key(str(body.get("model") or ""))
        rec = owner._record(self, key, body)
        status: int | None = None
        owner._enter()
        try:
            status = self._chat(owner, key, body)
        except _Aborted:
            self._drop()
        finally:
            owner._leave()
            owner._finish(rec, status)

    # --- chat completions -----------------------------------------------------------------

    def _chat(self, owner: ScriptedServer, key: str, body: dict[str, Any]) -> int | None:
        """Answer one chat completion; return the status sent (None when dropped)."""
        limited = owner._over_limit()
        if limited is not None:
            retry = _retry_after_header(limited)
            self._send_json(429, _error_body(
                f"Rate limit reached for requests on {key}: too many requests in flight. "
                f"Please try again in {retry}s.", "requests", "rate_limit_exceeded"),
                {"Retry-After": retry})
            return 429
        prompt_tokens = estimate_prompt_tokens(body)
        window = owner._windows.get(key)
        if window is not None:
            completion = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
            total = prompt_tokens + completion
            if total > window:
                self._send_json(400, _error_body(
                    f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {total} tokens ({prompt_tokens} in the messages, {completion} "
                    "in the completion). Please reduce the length of the messages or "
                    "completion.", "invalid_request_error", "context_length_exceeded"))
                return 400
        try:
            reply = owner._next_reply(key, body)
        except Exception as exc:  # a broken reply function: say so loudly, as a 500
            self._send_json(500, _error_body(f"scripted reply failed: {exc!r}", "server_error",
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
            headers["Retry-After"] = _retry_after_header(reply.retry_after)
        if reply.status != 200 and reply.error_body is not None:  # a provider's own shape
            self._send_json(reply.status, reply.error_body, headers)
            return reply.status
        if reply.status != 200:
            message, type_, code = _ERROR_DEFAULTS.get(
                reply.status, (f"Error {reply.status}", "server_error", None))
            code = reply.error_code or code
            if code == "insufficient_quota":
                message, type_ = _QUOTA_MESSAGE, "insufficient_quota"
            self._send_json(reply.status, _error_body(reply.error_message or message,
                                                      reply.error_type or type_, code), headers)
            return reply.status
        if reply.body is not None:
            raw = reply.body if isinstance(reply.body, bytes) else (
                reply.body.encode() if isinstance(reply.body, str) else
                json.dumps(reply.body).encode())
            self._send(200, raw, "application/json", headers)
            return 200
        completion = owner._completion(key, body, reply, prompt_tokens)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(completion, include_usage, headers)
        else:
            self._send_json(200, completion, headers)
        return 200

    def _wait(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if self.server.owner.stopping.wait(None if math.isinf(seconds) else seconds):
            raise _Aborted

    def _stream(self, completion: dict[str, Any], include_usage: bool,
                headers: dict[str, str]) -> None:
        """Server-sent events in chunked transfer encoding, as OpenAI streams them."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in _stream_events(completion, include_usage):
            data = f"data: {event}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")


def _stream_events(completion: dict[str, Any], include_usage: bool) -> list[str]:
    base = {"id": completion["id"], "object": "chat.completion.chunk",
            "created": completion["created"], "model": completion["model"],
            "system_fingerprint": None}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        obj = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": finish_reason}]}
        if include_usage:
            obj["usage"] = None
        return json.dumps(obj)

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        events.append(chunk({"reasoning_content": message["reasoning_content"]}))
    for piece in re.findall(r"\s*\S+\s*|\s+", message.get("content") or ""):
        events.append(chunk({"content": piece}))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"],
                                                          "arguments": ""}}]}))
        events.append(chunk({"tool_calls": [{"index": i, "function": {
            "arguments": call["function"]["arguments"]}}]}))
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append(json.dumps({**base, "choices": [], "usage": completion["usage"]}))
    events.append("[DONE]")
    return events


class ScriptedServer:
    """An OpenAI-compatible endpoint whose answers are scripted per model.

    ``script(model, *replies)`` replaces that model's script: replies are used in order and
    the last repeats forever; an entry may be a callable ``fn(body, n) -> Reply``. Unscripted
    models get ``default``. ``latency`` (seconds) is added to every chat reply.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, latency: float = 0.0):
        self.host = host
        self.port = port
        self.latency = latency
        self.default: Reply = Reply()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._scripts: dict[str, list[Any]] = {}
        self._served: dict[str, int] = {}
        self._windows: dict[str, int] = {}
        self._limit: tuple[int, float] | None = None
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._peak = 0
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self.stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"scripted-server:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging or sleeping handlers are released and their sockets closed."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The ``api_base`` to hand litellm: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    # --- scripting ------------------------------------------------------------------------

    def script(self, model: str, *replies: Reply | dict[str, Any] | str | ReplyFn) -> None:
        """Replace ``model``'s script (and restart its count). No replies = back to default."""
        entries = [r if callable(r) else Reply.coerce(r) for r in replies]
        key = model_key(model)
        with self._lock:
            if entries:
                self._scripts[key] = entries
            else:
                self._scripts.pop(key, None)
            self._served[key] = 0

    def window(self, model: str, n_tokens: int | None) -> None:
        """Reject requests whose estimated prompt + max_tokens exceed ``n_tokens`` (None: off)."""
        key = model_key(model)
        with self._lock:
            if n_tokens is None:
                self._windows.pop(key, None)
            else:
                self._windows[key] = n_tokens

    def max_in_flight(self, n: int | None, retry_after: float = 1.0) -> None:
        """Answer 429 + Retry-After to chat requests beyond ``n`` concurrent (None: no limit)."""
        with self._lock:
            self._limit = None if n is None else (n, retry_after)

    def reset(self) -> None:
        """Forget scripts, windows, the limit, recorded requests and the peak."""
        with self._lock:
            self._scripts.clear()
            self._served.clear()
            self._windows.clear()
            self._limit = None
            self._requests.clear()
            self._peak = self._in_flight
        self.default = Reply()

    def models(self) -> list[str]:
        with self._lock:
            return sorted(set(self._scripts) | set(self._windows))

    # --- recording ------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request so far (all paths), oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        key = model_key(model)
        return [r for r in self.requests if r.path == CHAT_PATH and r.model == key]

    def count(self, model: str | None = None) -> int:
        """How many chat completion requests arrived (for ``model``, or for all models)."""
        if model is not None:
            return len(self.requests_for(model))
        return sum(1 for r in self.requests if r.path == CHAT_PATH)

    @property
    def peak_in_flight(self) -> int:
        """Most chat requests open at once, counting ones answered 429 by ``max_in_flight``."""
        with self._lock:
            return self._peak

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    # --- used by the handler --------------------------------------------------------------

    def _record(self, handler: _Handler, key: str, body: dict[str, Any]) -> RecordedRequest:
        rec = RecordedRequest(model=key, body=body,
                              headers={k.lower(): v for k, v in handler.headers.items()},
                              path=handler.path.split("?", 1)[0].rstrip("/"),
                              t_start=time.monotonic())
        with self._lock:
            self._requests.append(rec)
        return rec

    def _finish(self, rec: RecordedRequest, status: int | None) -> None:
        rec.status = status
        rec.t_end = time.monotonic()

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _over_limit(self) -> float | None:
        """The Retry-After to send when this request is over the in-flight limit, else None."""
        with self._lock:
            if self._limit is not None and self._in_flight > self._limit[0]:
                return self._limit[1]
        return None

    def _next_reply(self, key: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            n = self._served.get(key, 0)
            self._served[key] = n + 1
            entries = self._scripts.get(key)
            entry = entries[min(n, len(entries) - 1)] if entries else self.default
        return Reply.coerce(entry(body, n) if callable(entry) else entry)

    def _completion(self, key: str, body: dict[str, Any], reply: Reply,
                    prompt_tokens: int) -> dict[str, Any]:
        seq = next(self._ids)
        tool_calls = []
        for i, call in enumerate(reply.tool_calls or []):
            args = call.get("arguments", {})
            tool_calls.append({
                "id": call.get("id") or f"call_{seq:06d}_{i}",
                "type": "function",
                "function": {"name": call["name"],
                             "arguments": args if isinstance(args, str) else json.dumps(args)},
            })
        usage_in = dict(reply.usage or {})
        reasoning_tokens = usage_in.pop("reasoning_tokens",
                                        _tokens(reply.reasoning) if reply.reasoning else 0)
        cached_tokens = usage_in.pop("cached_tokens", 0)
        prompt = usage_in.pop("prompt_tokens", prompt_tokens)
        visible = reply.text + "".join(c["function"]["arguments"] for c in tool_calls)
        completion = usage_in.pop("completion_tokens",
                                  max(1, _tokens(visible)) + reasoning_tokens)
        if "total_tokens" not in usage_in:  # hostile figures (strings, None) have no sum
            try:
                usage_in["total_tokens"] = prompt + completion
            except TypeError:
                usage_in["total_tokens"] = None
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": usage_in.pop("total_tokens"),
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens,
                                          "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0},
            **usage_in,
        }
        message: dict[str, Any] = {"role": "assistant", "content": reply.text,
                                   "refusal": None}
        if tool_calls:
            message["content"] = reply.text or None
            message["tool_calls"] = tool_calls
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
        doc = {
            "id": f"chatcmpl-scripted{seq:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or key),
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": usage,
        }
        if reply.no_usage:
            del doc["usage"]
        return doc


def load_script(srv: ScriptedServer, path: str) -> None:
    """Apply a JSON script file: ``{"model": [reply dict, ...], ...}``."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping model -> list of replies")
    for model, replies in data.items():
        if isinstance(replies, dict):
            replies = [replies]
        srv.script(model, *replies)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.testing.scripted_server",
        description="Serve scripted OpenAI-compatible replies; prints the URL, then serves "
                    "until killed.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="added to every chat reply")
    parser.add_argument("--script", metavar="FILE.json",
                        help='{"model": [{"text": "...", "latency": 0.5, ...}, ...]}')
    parser.add_argument("--max-in-flight", type=int, default=None,
                        help="answer 429 beyond this many concurrent requests")
    parser.add_argument("--window", action="append", default=[], metavar="MODEL=TOKENS",
                        help="context window for MODEL (repeatable)")
    args = parser.parse_args(argv)

    srv = ScriptedServer(args.host, args.port, latency=args.latency_ms / 1000)
    if args.script:
        load_script(srv, args.script)
    for spec in args.window:
        model, _, n = spec.rpartition("=")
        srv.window(model, int(n))
    if args.max_in_flight is not None:
        srv.max_in_flight(args.max_in_flight)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    srv.start()
    print(srv.url, flush=True)
    try:
        while not done.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
