"""The cluster snapshot in Redis: one writer (the leader's watcher), every replica a reader.

Every consistent change is one Lua script (``extenders/lua/*.lua``), so a reader never sees a
pod half-moved, and each script bumps the cluster generation at most once.

Key layout, all under the prefix ``P`` (one Redis, or the primary Sentinel names; a Redis Cluster
node is refused, see ``extenders/sync/redis_connect.py`` and docs/ARCHITECTURE.md, Redis topologies):

``P:gen``             cluster generation (INCR once per changing script)
``P:nodes``           zset node name -> generation of its last change (tombstones stay: hash gone)
``P:node:{name}``     hash ``_node`` -> NodeFacts record (resourceVersion left out), ``{uid}`` ->
                      PodInfo record of every pod bound or assumed there; pods may name a node
                      that has no ``_node`` (yet), as in kube-scheduler's cache
``P:noderv``          hash node name -> resourceVersion of its stored facts (kept out of the record
                      so a heartbeat that changes nothing else does not bump the generation)
``P:nodegone``        hash node name -> resourceVersion of the watcher's delete: a request carrying a
                      copy no newer than that cannot bring the node back; ``P:nodegonez`` name -> time
                      of the delete (ms), so markers older than a day are pruned
``P:podloc``          hash uid -> node name, for every placed pod
``P:pending``         hash uid -> PodInfo record of unbound, non-terminal pods; ``P:pendingz`` uid -> gen
``P:{hash}``/``P:{hash}z``  each kind of the table in ``extenders/sync/kinds.py``: records by key
                      (name, or namespace/name) and the generation of each key's last change
                      (``pdb``, ``podgroup``, ``ns``, ``pvc``, ``svc``, ``rc``, ``rs``, ``sts``)
``P:assumed``         zset uid -> deadline (ms, Redis clock) of pods assumed but not yet confirmed
``P:refused``/``P:refusedpod``  pods filter refused on every node in the last minute (zset uid ->
                      time, hash uid -> namespace/name); ``P:requeued`` uid -> time of its last requeue;
                      ``P:retrygen``/``P:retryat`` generation and time (ms) of the last change
                      kube-scheduler retries parked pods on
``P:tombs``           zset ``n:`` + node, ``p:`` + pending uid or ``{hash}:`` + key -> generation of
                      the delete, for compaction
``P:floor``           generation below which tombstones were compacted (older replicas reload)
``P:synced``          set by the leader once its initial list of every watched resource is written
``P:leader``          lease ``holder|epoch`` (SET PX); ``P:epoch`` fencing counter (INCR per term)
``P:eq:{scope}:…``    the equivalence cache's shared tier, when on (see extenders/equivalence/shared.py)
``P:storeid``         random id of this history of the keys (SET NX by whoever first finds it
                      missing): if Redis loses its data the generation restarts at 0 and the id
                      changes, so a replica reloads instead of applying a delta from another
                      history, and a leader from before the loss is fenced even if the new epoch
                      counter reaches its epoch again
``P:server``          run id of the Redis server process that last served these keys; a new
                      connection to another one (a failover) sets a new ``P:storeid`` and drops the
                      lease (``extenders/sync/redis_connect.py``, ``lua/history.lua``)
``P:acks``            counter written just before ``WAIT`` (``Store.replicated``), so the wait
                      covers everything written before it on any connection
"""

from extenders.sync.ops import Op
from extenders.sync.store.base import FencedError
from extenders.sync.store.lease import Lease, LeaseAttempt, LeaseHolder, holder_replica
from extenders.sync.store.reader import CatchUp, SnapshotReader
from extenders.sync.store.reservations import AssumeResult, AssumeStatus, Reservations
from extenders.sync.store.writer import SnapshotWriter

__all__ = [
    "AssumeResult",
    "AssumeStatus",
    "CatchUp",
    "FencedError",
    "Lease",
    "LeaseAttempt",
    "Op",
    "Store",
    "holder_replica",
]


class Store(SnapshotWriter, Reservations, LeaseHolder, SnapshotReader):
    """Typed access to the snapshot keys; every method is one round trip unless it says otherwise."""
