"""The app's pure ASGI middlewares (each wraps every request below FastAPI), and the cycle verbs' way in front of it."""

from app.middleware.body_limit import BodyLimitMiddleware
from app.middleware.hot_verbs import ExtenderApp, HotVerbs
from app.middleware.json_body import JsonBodyMiddleware
from app.middleware.metrics import MetricsMiddleware
from app.middleware.operator_access import OperatorTokenMiddleware

__all__ = [
    "BodyLimitMiddleware",
    "ExtenderApp",
    "HotVerbs",
    "JsonBodyMiddleware",
    "MetricsMiddleware",
    "OperatorTokenMiddleware",
]
