"""Secrets kept out of what the server prints and answers."""

from __future__ import annotations

from urllib.parse import urlsplit

_SECRET_FIELDS = ("password=", "ssl_password=")


def redacted_url(url: str | None) -> str | None:
    """``url`` with its password (in the user part, or ``password=``/``ssl_password=`` in the query)
    replaced by ``***``."""
    if not url:
        return url
    parts = urlsplit(url)
    head, sep, query = url.partition("?")
    if parts.password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        head = head.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{host}", 1)
    fields = [
        f"{field.partition('=')[0]}=***" if field.lower().startswith(_SECRET_FIELDS) else field
        for field in query.split("&")
    ]
    return head + sep + "&".join(fields)
