"""The process around the app: listeners, TLS, logging and the private redis-server of ``python -m app``.

Nothing is imported here, so tools that only need ``app.serving.embedded_redis`` do not load the web app.
"""
