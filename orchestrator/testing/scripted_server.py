"""A scripted OpenAI-compatible server on 127.0.0.1, for tests and plugin authors.

It speaks real HTTP so requests travel the same road as a provider's: litellm, its aiohttp
connection pool, its exception mapping. Each model gets a script of replies (text, tool
calls, usage, latency, HTTP errors, hangs, dropped sockets); every request is recorded.

Stdlib only, so importing it costs nothing::

    with ScriptedServer() as srv:
        srv.script("m", Reply(text="hi"), Reply(status=429, retry_after=2))
        litellm.completion(model="openai/m", api_base=srv.url, api_key="sk-test", ...)

Run ``python -m orchestrator.testing.scripted_server --help`` for the benchmark CLI.

This module holds the server object (scripts, limits, the record) and that CLI; the reply
and request types are in :mod:`~orchestrator.testing.scripted_reply`, the HTTP handler in
:mod:`~orchestrator.testing.scripted_http`, the bodies it sends in
:mod:`~orchestrator.testing.scripted_body` and :mod:`~orchestrator.testing.scripted_sse`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from orchestrator.testing.scripted_http import CHAT_PATH, HTTPServer
from orchestrator.testing.scripted_reply import (
    RecordedRequest,
    Reply,
    ReplyFn,
    estimate_prompt_tokens,
    model_key,
)

__all__ = ["CHAT_PATH", "RecordedRequest", "Reply", "ReplyFn", "ScriptedServer",
           "estimate_prompt_tokens", "load_script", "main", "model_key"]


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
        self.models_key: str | None = None  # set: GET /v1/models wants this bearer key
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._peak = 0
        self._ids = itertools.count(1)
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self.stopping.clear()
        self._httpd = HTTPServer((self.host, self.port), self)
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
        self.models_key = None
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

    @property
    def chats(self) -> list[RecordedRequest]:
        """The chat completion requests only, oldest first (not a launch's GET /models)."""
        return [r for r in self.requests if r.path == CHAT_PATH]

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

    # --- used by the handler (orchestrator.testing.scripted_http) ---------------------------

    def record(self, key: str, body: dict[str, Any], headers: Iterable[tuple[str, str]],
               path: str) -> RecordedRequest:
        """Record a request as it arrives; the handler calls its ``finish`` when it is over."""
        rec = RecordedRequest(model=key, body=body,
                              headers={k.lower(): v for k, v in headers},
                              path=path.split("?", 1)[0].rstrip("/"),
                              t_start=time.monotonic())
        with self._lock:
            self._requests.append(rec)
        return rec

    def enter(self) -> None:
        """A chat request is open (counted for ``max_in_flight`` and the peak)."""
        with self._lock:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def leave(self) -> None:
        """A chat request is over, whatever became of it."""
        with self._lock:
            self._in_flight -= 1

    def over_limit(self) -> float | None:
        """The Retry-After to send when this request is over the in-flight limit, else None."""
        with self._lock:
            if self._limit is not None and self._in_flight > self._limit[0]:
                return self._limit[1]
        return None

    def window_of(self, key: str) -> int | None:
        """The context window set for model ``key`` by :meth:`window`, if any."""
        return self._windows.get(key)

    def next_reply(self, key: str, body: dict[str, Any]) -> Reply:
        """The next entry of ``key``'s script (the last repeats; a callable is called)."""
        with self._lock:
            n = self._served.get(key, 0)
            self._served[key] = n + 1
            entries = self._scripts.get(key)
            entry = entries[min(n, len(entries) - 1)] if entries else self.default
        return Reply.coerce(entry(body, n) if callable(entry) else entry)

    def next_id(self) -> int:
        """The sequence number of the next completion (its ids are made from it)."""
        return next(self._ids)


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
