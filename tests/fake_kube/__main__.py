"""``python -m tests.fake_kube --port N``: run the fake kube-apiserver on 127.0.0.1."""

from __future__ import annotations

import argparse

import uvicorn

from .server import FakeConfig, create_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_kube", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default=None, help="require this bearer token on API requests")
    parser.add_argument("--no-podgroups", action="store_true", help="serve without the PodGroup CRD (404s)")
    parser.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between BOOKMARKs")
    parser.add_argument("--history", type=int, default=1000, help="watch events kept per resource")
    args = parser.parse_args(argv)
    config = FakeConfig(
        token=args.token,
        podgroups=not args.no_podgroups,
        bookmark_interval=args.bookmark_interval,
        history_limit=args.history,
    )
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=1,  # open watch streams must not hold up a stop
    )


if __name__ == "__main__":
    main()
