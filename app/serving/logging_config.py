"""Process logging: plain text for people, or JSON lines with stable keys for log pipelines."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.orjson import OrjsonFormatter

from extenders.logs import CONTEXT_KEYS, current_fields

# HTTP client libraries that log every request at INFO: one line per Binding and watch call drowns
# the extender's own log. They speak only at DEBUG.
CHATTY_LOGGERS = ("httpx", "httpcore", "aiohttp.access")

# uvicorn attaches an ANSI-coloured copy of some messages; it is noise in JSON.
_SKIPPED = (*RESERVED_ATTRS, "color_message", "taskName")


class _ContextFilter(logging.Filter):
    """Copies the request's fields (verb, pod, gang, node) onto each record passing the handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current_fields().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(OrjsonFormatter):
    """One JSON object per line: time, level, logger, message, replica, then verb/pod/gang/node when known."""

    def __init__(self, replica: str) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
            static_fields={"replica": replica},
            reserved_attrs=_SKIPPED,
        )

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        # Set first so it leads every line.
        log_data["time"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)


class TextFormatter(logging.Formatter):
    """The classic line, with the request's fields appended in brackets when there are any."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(f"{k}={getattr(record, k)}" for k in CONTEXT_KEYS if getattr(record, k, None))
        return f"{line} [{fields}]" if fields else line


def configure_logging(level: str, fmt: str = "text", replica: str = "") -> None:
    """Route every logger, uvicorn's included, through one stderr handler in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ContextFilter())
    handler.setFormatter(JsonFormatter(replica) if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    quiet = logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    # uvicorn's own loggers propagate to the root handler instead of printing in their own format.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
