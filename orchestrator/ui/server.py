"""The HTTP side of ``orch ui``: the stdlib's threading server on loopback, and the guard every
request passes before a page is built.

Why the stdlib and not Starlette: the view is a handful of GET routes over files and one SQL
rollup; the base install already has what it needs (no ``gateway`` extra to run ``orch ui``),
and every header the browser sees is one this module wrote (no middleware adds CORS).

The guard, in order: the ``Host`` header must name this server (``127.0.0.1:PORT`` or
``localhost:PORT``: a DNS-rebinding page cannot reach it); the request must carry the token,
as ``?token=`` (answered with an HttpOnly, SameSite=Strict cookie and a redirect that drops
it from the address bar) or as that cookie; only GET is served. Everything else is 403/405.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

LOOPBACK = "127.0.0.1"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the token never leaves in a Referer
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


class Reply:
    """What a route answers: a status, a body and its type (HTML unless said)."""

    def __init__(self, body: str | bytes, status: int = 200,
                 content_type: str = "text/html; charset=utf-8") -> None:
        self.body = body.encode() if isinstance(body, str) else body
        self.status = status
        self.content_type = content_type


Router = Callable[[str, dict[str, list[str]]], Reply]


class UIServer(ThreadingHTTPServer):
    """A loopback-only server holding the token and the router."""

    daemon_threads = True

    def __init__(self, router: Router, port: int = 0, token: str | None = None) -> None:
        self.router = router
        self.token = token or secrets.token_urlsafe(32)
        super().__init__((LOOPBACK, port), _Handler)
        self.port = self.server_address[1]
        self.allowed_hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        # one name per port: browsers keep cookies per host, not per port, so two orch ui
        # at once would otherwise overwrite each other's
        self.cookie = f"orch_ui_{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self) -> threading.Thread:
        """Serve in a daemon thread (tests, and ``orch serve`` later); returns it."""
        thread = threading.Thread(target=self.serve_forever, name="orch-ui", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: UIServer
    server_version = "orch-ui"
    sys_version = ""

    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        return  # a URL may hold the token: never logged

    def _send(self, reply: Reply, extra: dict[str, str] | None = None) -> None:
        self.send_response(reply.status)
        for name, value in {**HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def _refuse(self, status: int, why: str) -> None:
        self._send(Reply(f"{status} {why}\n", status, "text/plain; charset=utf-8"))

    def _guard(self) -> tuple[str, dict[str, list[str]]] | None:
        """The path and query of an admitted request, else None (already answered)."""
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: wrong Host (open the URL orch ui "
                         "printed)")
            return None
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        given = (query.pop("token", [""]) or [""])[0]
        if given:
            if not hmac.compare_digest(given.encode(), self.server.token.encode()):
                self._refuse(HTTPStatus.FORBIDDEN, "forbidden: wrong token")
                return None
            rest = urlencode(query, doseq=True)
            self._send(Reply("", HTTPStatus.SEE_OTHER, "text/plain"), {
                "Location": parts.path + (f"?{rest}" if rest else ""),
                "Set-Cookie": f"{self.server.cookie}={self.server.token}; HttpOnly; "
                              "SameSite=Strict; "
                              "Path=/"})
            return None
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed Cookie header is no token
            cookie = SimpleCookie()
        name = self.server.cookie
        held = cookie[name].value if name in cookie else ""
        if not held or not hmac.compare_digest(held.encode(), self.server.token.encode()):
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: no token (open the URL orch ui "
                         "printed)")
            return None
        return parts.path, query

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        admitted = self._guard()
        if admitted is None:
            return
        path, query = admitted
        try:
            reply = self.server.router(path, query)
        except Exception as exc:  # noqa: BLE001 - one bad record must not kill the server
            reply = Reply(f"500 cannot show this page: {type(exc).__name__}: {exc}\n", 500,
                          "text/plain; charset=utf-8")
        self._send(reply)

    def _read_only(self) -> None:
        if self._guard() is not None:
            self._send(Reply("405 read-only: orch ui serves GET only\n", 405,
                             "text/plain; charset=utf-8"), {"Allow": "GET"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _read_only  # noqa: N815
