"""Shared fixtures: real Redis, real server processes, the fake Kubernetes API server."""

pytest_plugins = [
    "tests.plugins.redis_server",
    "tests.plugins.redis_replication",
    "tests.plugins.servers",
    "tests.plugins.fake_kube",
    "tests.plugins.e2e_tier",
]
