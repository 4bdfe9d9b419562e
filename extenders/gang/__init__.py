"""Gang rules: membership, filter-time checks, admission, the Lua bookkeeping behind all-or-nothing binding.

``GangService`` (extenders.gang.service) is what the HTTP layer wires in; binding is extenders.binding's.
"""

from extenders.gang.config import DEFAULT_LABELS, GangConfig, parse_label_pairs
from extenders.gang.filter import GangVerdict
from extenders.gang.membership import GangIndex, GangMembers, GangRef, gang_of, gang_of_for, gang_ref
from extenders.gang.service import GangService

__all__ = [
    "DEFAULT_LABELS",
    "GangConfig",
    "GangIndex",
    "GangMembers",
    "GangRef",
    "GangService",
    "GangVerdict",
    "gang_of",
    "gang_of_for",
    "gang_ref",
    "parse_label_pairs",
]
