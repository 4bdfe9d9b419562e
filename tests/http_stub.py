"""A canned-answer HTTP handler for tests that probe a server: one path answers, every other fails."""

from __future__ import annotations

import http.server


def one_path_handler(
    path: str, ok: tuple[int, bytes], other: tuple[int, bytes]
) -> type[http.server.BaseHTTPRequestHandler]:
    """A handler class answering GET ``path`` with ``ok`` and any other path with ``other`` (status, body)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = ok if self.path == path else other
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
