"""The Lua scripts behind every consistent change in Redis: each ``*.lua`` here runs atomically."""

from extenders.lua.scripts import register, script_name, source

__all__ = ["register", "script_name", "source"]
