"""Small stdlib HTTP handlers for tests: a canned answer per path, and the one way they all reply."""

from __future__ import annotations

import http.server


def reply(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "") -> None:
    """Send ``body`` with ``status`` and its length (and ``content_type`` when given)."""
    handler.send_response(status)
    if content_type:
        handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def one_path_handler(
    path: str, ok: tuple[int, bytes], other: tuple[int, bytes]
) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler class answering GET ``path`` with ``ok`` and any other path with ``other`` (status, body)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            reply(self, *(ok if self.path == path else other))

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
