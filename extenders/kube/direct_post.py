"""The Binding POST straight through aiohttp's pool, beside the httpx client that owns it.

Under bind load the Binding was a third of the bind replica's CPU, and most of that was httpx
building its request and response (URL parsing, header merging, the adapter's conversions): about
0.9 ms of CPU per POST against 0.3 ms for the same POST through the aiohttp session. This lane sends
the client's own headers and the credentials its auth flow produced last; whatever it cannot do
the same way (no credentials seen yet, a 401 that may need them refreshed) goes through httpx.
"""

from __future__ import annotations

import httpx
from lightkube.config.client_adapter import BearerAuth, BearerTokenFileAuth, ExecAuth

from extenders.kube.transport import AiohttpKubeTransport

# Auth flows whose Authorization header stays the same from one request to the next until the API
# server refuses it (a 401 sends the request through httpx, where the flow renews it).
_STEADY_AUTH = (BearerAuth, BearerTokenFileAuth, ExecAuth)
# httpx's own lookup of the transport for a URL (proxy mounts included). It is not public: should an
# httpx release rename it, there is no lane and every request goes through httpx.
TRANSPORT_LOOKUP = "_transport_for_url"


class DirectPost:
    """POSTs through the client's aiohttp transport with the client's headers and last credentials."""

    def __init__(self, http: httpx.AsyncClient, transport: AiohttpKubeTransport) -> None:
        self._http = http
        self._transport = transport
        self._base = str(http.base_url).rstrip("/")
        self._uses_auth = http.auth is not None
        # The Authorization header the auth flow put on the last request (None: it put none).
        self._credentials: str | None = None
        self._ready = not self._uses_auth
        self._headers: dict[str, str] | None = None
        self.posted = 0  # requests this lane answered
        if self._uses_auth:
            http.event_hooks["request"].append(self._note_credentials)

    @classmethod
    def over(cls, http: httpx.AsyncClient) -> DirectPost | None:
        """The lane for ``http``, or None when its requests do not go out through aiohttp's pool with
        credentials the lane can reuse."""
        lookup = getattr(http, TRANSPORT_LOOKUP, None)
        if not callable(lookup):
            return None
        transport = lookup(http.base_url)
        if not isinstance(transport, AiohttpKubeTransport):
            return None
        if http.auth is not None and not isinstance(http.auth, _STEADY_AUTH):
            return None
        return cls(http, transport)

    async def _note_credentials(self, request: httpx.Request) -> None:
        """httpx's request hook, called after the auth flow: what it sent is what the lane sends."""
        credentials = request.headers.get("Authorization")
        if credentials != self._credentials or not self._ready:
            self._credentials, self._headers, self._ready = credentials, None, True

    def _current_headers(self) -> dict[str, str]:
        if self._headers is None:
            headers = dict(self._http.headers)  # httpx's names are lower case
            # aiohttp offers the encodings it can decode itself (httpx may offer others).
            headers.pop("accept-encoding", None)
            if self._uses_auth:
                headers.pop("authorization", None)
                if self._credentials is not None:
                    headers["Authorization"] = self._credentials
            headers["Content-Type"] = "application/json"
            self._headers = headers
        return self._headers

    async def post(self, path: str, body: bytes) -> tuple[int, bytes] | None:
        """The status and answer of a JSON POST to ``path`` (already encoded), or None when it must go
        through httpx instead: no credentials seen yet, or refused with 401 while the flow may renew
        them. Failures are httpx errors."""
        if not self._ready:
            return None
        status, content = await self._transport.post(
            self._base + path, body, self._current_headers(), self._http.timeout
        )
        if status == 401 and self._uses_auth:
            self._ready = False  # the retry through httpx runs the flow and notes what it sends
            return None
        self.posted += 1
        return status, content
