"""Gang scheduling: membership, filter-time checks, admission and all-or-nothing binding.

``GangService`` (extenders.gang.service) is the facade the HTTP layer wires in.
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
