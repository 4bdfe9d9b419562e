"""The path a Kubernetes object takes to every replica's snapshot.

The watch leader's ``watcher`` lists and watches each kind of ``kinds``, ``convert`` reduces an
object to its scheduling view and ``records`` encodes it; ``store`` writes it to Redis in one Lua
script per consistent change; each replica's ``cache`` catches up from Redis and builds an immutable
``extenders.snapshot.Snapshot``. ``leader`` holds the watch lease; ``redis_connect`` opens Redis.
"""
