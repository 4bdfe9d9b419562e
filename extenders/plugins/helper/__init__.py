"""Helpers the plug-ins share."""
