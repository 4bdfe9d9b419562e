"""``python -m app.healthcheck [PATH]``: probe this replica from inside its container.

The image's HEALTHCHECK runs it: the image has no curl, and the probe must follow the replica's own
settings (the plain-HTTP health port when one is set, else the main port, over HTTPS when it serves
TLS). Exit status 0 when PATH (``/healthz`` unless given) answers 200, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

DEFAULT_PORT = 8888


def probe_url(env: Mapping[str, str], path: str, port: int = DEFAULT_PORT) -> str:
    """Where to probe: the health port (plain HTTP) if set, else the main port with its scheme."""
    health_port = env.get("EXTENDER_HEALTH_PORT")
    if health_port:
        return f"http://127.0.0.1:{int(health_port)}{path}"
    scheme = "https" if env.get("EXTENDER_TLS_CERT_FILE") else "http"
    return f"{scheme}://127.0.0.1:{port}{path}"


def probe(url: str, timeout: float = 3.0) -> tuple[bool, str]:
    """``(healthy, what happened)``. Over HTTPS the certificate is not verified: the probe reaches its
    own container on loopback, where the serving certificate's names do not apply."""
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return resp.status == 200, f"{resp.status} {resp.read(200).decode(errors='replace')}"
    except urllib.error.HTTPError as exc:
        return False, f"{exc.code} {exc.read(200).decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return False, str(exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.healthcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default="/healthz", help="/healthz (default) or /readyz")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the replica's main port (default 8888)")
    args = parser.parse_args(argv)
    url = probe_url(os.environ, args.path, args.port)
    healthy, detail = probe(url)
    print(f"{url}: {detail}", file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
