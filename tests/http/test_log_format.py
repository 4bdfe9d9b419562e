"""Log output as operators consume it: JSON lines with stable keys, or text with the request's fields."""

from __future__ import annotations

import logging

import orjson
import pytest

from app.serving.logging_config import configure_logging
from extenders.logs import log_fields


def _lines(err: str) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in err.splitlines() if line.strip()]


def test_json_lines_have_stable_keys_and_the_request_fields(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", "json", replica="r1")
    log = logging.getLogger("extenders.test")
    log.info("outside any request")
    with log_fields(verb="bind", pod="ns/a", node="n1"), log_fields(gang="ns/g"):
        log.warning("gang %s waits", "ns/g")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    logging.getLogger("uvicorn.error").info("Started", extra={"color_message": "\x1b[1mStarted\x1b[0m"})
    logging.getLogger("httpx").info("HTTP Request: GET /api/v1/nodes")  # only at debug
    plain, request, failure, uvicorn = _lines(capsys.readouterr().err)
    assert list(plain) == ["time", "level", "logger", "message", "replica"]
    assert plain["level"] == "INFO" and plain["logger"] == "extenders.test" and plain["replica"] == "r1"
    assert str(plain["time"]).endswith("+00:00")
    assert request["message"] == "gang ns/g waits"
    assert {k: request[k] for k in ("verb", "pod", "node", "gang")} == {
        "verb": "bind",
        "pod": "ns/a",
        "node": "n1",
        "gang": "ns/g",
    }
    assert failure["level"] == "ERROR" and "RuntimeError: boom" in str(failure["exception"])
    assert uvicorn["logger"] == "uvicorn.error" and "color_message" not in uvicorn


def test_text_lines_carry_the_request_fields(restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "text", replica="r1")
    with log_fields(verb="filter", pod="ns/a"):
        logging.getLogger("extenders.test").warning("no node fits")
    line = capsys.readouterr().err.strip()
    assert line.endswith("WARNING extenders.test: no node fits [verb=filter pod=ns/a]"), line
