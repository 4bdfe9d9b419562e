"""Gang rules: membership, filter-time checks, admission, the Lua bookkeeping behind all-or-nothing binding.

The HTTP layer wires in ``GangService`` (extenders.gang.service) and the bind verb, ``BindService``
(extenders.gang.bind): the gang's Permit lives beside its bookkeeping, over extenders.binding's binder.
"""

from extenders.gang.bind import BindService
from extenders.gang.config import DEFAULT_LABELS, GangConfig, parse_label_pairs
from extenders.gang.filter import GangVerdict
from extenders.gang.membership import GangIndex, GangMembers, GangRef, gang_of, gang_of_for, gang_ref, names_a_gang
from extenders.gang.service import GangService

__all__ = [
    "DEFAULT_LABELS",
    "BindService",
    "GangConfig",
    "GangIndex",
    "GangMembers",
    "GangRef",
    "GangService",
    "GangVerdict",
    "gang_of",
    "gang_of_for",
    "gang_ref",
    "names_a_gang",
    "parse_label_pairs",
]
