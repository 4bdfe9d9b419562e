"""A route class for the verbs: the body is parsed once, from bytes straight into its model.

FastAPI's general handler decodes the body with the stdlib json, parses the Content-Type and
solves dependencies before pydantic validates the decoded dict; at kube-scheduler's call rate
that is a measurable share of every call. pydantic's own JSON parser validates while it parses
(integers of any size stay exact; a lone surrogate is refused here rather than met later). The
errors are FastAPI's own, so ``app.errors`` answers them as before. OpenAPI is unchanged: it is
generated from the endpoint, not from the handler.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class BodyRoute(APIRoute):
    """For endpoints taking exactly one pydantic body and, optionally, the Request; any other
    shape keeps FastAPI's handler."""

    def get_route_handler(self) -> Handler:
        dependant = self.dependant
        plain = (
            len(dependant.body_params) == 1
            and not (dependant.path_params or dependant.query_params or dependant.header_params)
            and not (dependant.cookie_params or dependant.dependencies)
        )
        model = dependant.body_params[0].field_info.annotation if plain else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return super().get_route_handler()
        body_name = dependant.body_params[0].name
        request_name = dependant.request_param_name
        endpoint = self.endpoint
        parse = model.model_validate_json

        async def handler(request: Request) -> Response:
            body = await request.body()
            if not body:
                raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
            try:
                args = parse(body)
            except ValidationError as exc:
                errors = exc.errors(include_url=False)
                raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in errors]) from None
            kwargs: dict[str, Any] = {body_name: args}
            if request_name is not None:
                kwargs[request_name] = request
            answer = await endpoint(**kwargs)
            if not isinstance(answer, Response):
                raise TypeError(f"{endpoint.__name__} must return a Response")
            return answer

        return handler
