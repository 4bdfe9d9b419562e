"""The reasons of the Events the extender writes about gangs and binds, and each one's type."""

from __future__ import annotations

from extenders.kube.events import NORMAL, WARNING

GANG_WAITING = "GangWaiting"  # too few members yet, queued for a slot, or not enough room yet
GANG_ADMITTED = "GangAdmitted"  # admitted to assemble: members pass filter and are held at bind
GANG_PERMITTED = "GangPermitted"  # the quorum is placed: every held member binds
GANG_REJECTED = "GangRejected"  # the window closed first: reservations released, cool-down begins
GANG_RELEASED = "GangReleased"  # too few live members left: held members, slot and queue place released
GANG_PREEMPTED = "GangPreempted"  # preempted whole: kube-scheduler evicted members on one node, the extender the rest
PREEMPTED = "Preempted"  # a member the extender evicted so that its gang goes whole (kube-scheduler's own reason)
GANG_COOLING_DOWN = "GangCoolingDown"  # turned away while the gang cools down after a rejection
GANG_INVALID = "GangInvalid"  # the gang's minimum cannot be told (a missing or bad label)
BIND_FAILED = "BindFailed"  # the Binding could not be created, or the pod no longer fits its node

TYPES = {
    GANG_WAITING: NORMAL,
    GANG_ADMITTED: NORMAL,
    GANG_PERMITTED: NORMAL,
    GANG_REJECTED: WARNING,
    GANG_RELEASED: WARNING,
    GANG_PREEMPTED: WARNING,
    PREEMPTED: NORMAL,
    GANG_COOLING_DOWN: WARNING,
    GANG_INVALID: WARNING,
    BIND_FAILED: WARNING,
}
