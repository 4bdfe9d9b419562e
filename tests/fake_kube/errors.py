"""metav1.Status bodies as kube-apiserver writes them, and the exception that carries one."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code: int, message: str, reason: str | None = None, details: Json | None = None) -> Json:
    """A failure Status: the body of every non-2xx answer and of watch ERROR events."""
    body: Json = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, ""),
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def success_body(code: int, details: Json | None = None) -> Json:
    body: Json = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details is not None:
        body["details"] = details
    return body


class ApiError(Exception):
    """Raised anywhere in the fake; the server turns it into an HTTP answer with a Status body."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: Json | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, reason, details)


def _details(resource: str, name: str, group: str) -> Json:
    details: Json = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return details


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(404, f'{qualified} "{name}" not found', "NotFound", _details(resource, name, group))


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(409, f'{qualified} "{name}" already exists', "AlreadyExists", _details(resource, name, group))


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        "Conflict",
        _details(resource, name, group),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


def invalid(kind: str, name: str, field_errors: str, group: str = "") -> ApiError:
    return ApiError(422, f'{kind} "{name}" is invalid: {field_errors}', "Invalid", {"name": name, "kind": kind})


def expired(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"
GENERIC_NOT_FOUND = "the server could not find the requested resource"
