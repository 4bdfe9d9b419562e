"""The app's pure ASGI middlewares: each one wraps every request, below or instead of FastAPI's routing."""

from app.middleware.body_limit import BodyLimitMiddleware
from app.middleware.hot_verbs import HotVerbsMiddleware
from app.middleware.json_body import JsonBodyMiddleware
from app.middleware.metrics import MetricsMiddleware
from app.middleware.operator_access import OperatorTokenMiddleware

__all__ = [
    "BodyLimitMiddleware",
    "HotVerbsMiddleware",
    "JsonBodyMiddleware",
    "MetricsMiddleware",
    "OperatorTokenMiddleware",
]
