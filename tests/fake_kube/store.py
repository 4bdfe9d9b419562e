"""The fake's etcd plus watch cache: objects, one global revision, bounded per-resource event history.

Every method is synchronous and runs on the event loop thread, so each one is atomic with respect to
the others (no locks): an event is appended to the history and handed to every open watch's queue
in the same step that commits it.
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import uuid
from collections import Counter
from typing import Any

from . import errors
from .errors import ApiError, Json
from .objects import (
    Key,
    check_preconditions,
    default_pod,
    label_namespace,
    merge_patch,
    now_rfc3339,
    pod_spec_for_compare,
)
from .resources import ALL, NAMESPACES, PDBS, PODGROUPS, PODS, PVCS, ResourceType
from .selectors import Matcher
from .watches import Event, Table, Watch


class Store:
    def __init__(self, history_limit: int = 1000) -> None:
        self.rv = 0
        self.history_limit = history_limit
        self.tables = {rt.plural: Table(rt) for rt in ALL}
        self.pages: dict[str, tuple[ResourceType, int, list[Json]]] = {}  # continue token -> rest of a list
        self.requests: Counter[tuple[str, str]] = Counter()  # (verb, plural) -> count

    # -- commit path ------------------------------------------------------------------------------

    def _commit(self, rtype: ResourceType, etype: str, obj: Json, prev: Json | None) -> Json:
        table = self.tables[rtype.plural]
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if etype == "DELETED":
            table.objects.pop(key, None)
        else:
            table.objects[key] = obj
        event = Event(self.rv, etype, obj, prev)
        table.history.append(event)
        while len(table.history) > self.history_limit:
            table.compacted_rv = table.history.popleft().rv
        for watch in table.watches:
            seen = watch.translate(event)
            if seen is not None:
                watch.queue.put_nowait(seen)
        return obj

    def _existing(self, rtype: ResourceType, key: Key) -> Json:
        obj = self.tables[rtype.plural].objects.get(key)
        if obj is None:
            raise errors.not_found(rtype.plural, key[1], rtype.group)
        return obj

    # -- reads ------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, key: Key) -> Json:
        return self._existing(rtype, key)

    def list_objects(
        self,
        rtype: ResourceType,
        namespace: str | None,
        match: Matcher,
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
    ) -> Json:
        table = self.tables[rtype.plural]
        if continue_token:
            page = self.pages.pop(continue_token, None)
            if page is None or page[0] is not rtype:
                raise errors.bad_request("continue key is not valid: unknown or already used continue token")
            _, list_rv, items = page
            if list_rv < table.compacted_rv:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
        else:
            if resource_version not in ("", "0") and int(resource_version) > self.rv:
                raise ApiError(
                    504,
                    f"Too large resource version: {resource_version}, current: {self.rv}",
                    "Timeout",
                    {
                        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                        "retryAfterSeconds": 1,
                    },
                )
            list_rv = self.rv
            items = [
                obj
                for key, obj in sorted(table.objects.items())
                if (namespace is None or key[0] == namespace) and match(obj)
            ]
        meta: Json = {"resourceVersion": str(list_rv)}
        if limit and len(items) > limit:
            token = secrets.token_urlsafe(12)
            self.pages[token] = (rtype, list_rv, items[limit:])
            while len(self.pages) > 100:  # abandoned paginations must not grow without bound
                del self.pages[next(iter(self.pages))]
            meta["continue"] = token
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if rtype.builtin:  # typed lists omit each item's apiVersion/kind
            items = [{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} for obj in items]
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": meta,
            "items": items,
        }

    # -- writes -----------------------------------------------------------------------------------

    def _check_type(self, rtype: ResourceType, body: Any, namespace: str | None) -> Json:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise errors.bad_request("the object provided is unrecognized (must be a JSON object)")
        if body.get("apiVersion", rtype.api_version) != rtype.api_version:
            raise errors.bad_request(
                f"the API version in the data ({body['apiVersion']}) does not match the expected API version "
                f"({rtype.api_version})"
            )
        if body.get("kind", rtype.kind) != rtype.kind:
            raise errors.bad_request(
                f"the kind in the data ({body['kind']}) does not match the expected kind ({rtype.kind})"
            )
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        meta = obj.setdefault("metadata", {})
        if rtype.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    def create(self, rtype: ResourceType, namespace: str | None, body: Any) -> Json:
        obj = self._check_type(rtype, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(rtype.kind, "", "metadata.name: Required value: name or generateName is required")
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if meta.get("resourceVersion"):
            raise ApiError(500, "Internal error occurred: resourceVersion should not be set on objects to be created")
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.tables[rtype.plural].objects:
            raise errors.already_exists(rtype.plural, meta["name"], rtype.group)
        for system_field in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            meta.pop(system_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rtype.has_generation:
            meta["generation"] = 1
        if rtype is PODS:
            default_pod(obj)
        elif rtype is PDBS:
            obj["status"] = {
                "disruptionsAllowed": 0,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            }
        elif rtype is PODGROUPS:
            obj.pop("status", None)  # the CRD has a status subresource: status is not set on create
        elif rtype is NAMESPACES:
            label_namespace(obj)
            obj["status"] = {"phase": "Active"}
        elif rtype is PVCS:
            obj["status"] = {"phase": "Pending"}  # no volume binding here
        return self._commit(rtype, "ADDED", obj, None)

    def _write(self, rtype: ResourceType, old: Json, new: Json, subresource: str | None) -> Json:
        """Common tail of PUT and PATCH: optimistic concurrency, status split, immutability, no-op."""
        key = (old["metadata"].get("namespace", ""), old["metadata"]["name"])
        new_meta = new.setdefault("metadata", {})
        if new_meta.get("name", key[1]) != key[1]:
            raise errors.bad_request(
                f"the name of the object ({new_meta['name']}) does not match the name on the URL ({key[1]})"
            )
        sent_rv = new_meta.get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, key[1], errors.STALE_OBJECT, rtype.group)
        if not sent_rv and not rtype.builtin:  # custom resources forbid unconditional updates
            raise errors.invalid(
                rtype.kind,
                key[1],
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        if subresource == "status":  # only the status moves
            obj = copy.deepcopy(old)
            if "status" in new:
                obj["status"] = copy.deepcopy(new["status"])
            else:
                obj.pop("status", None)
        else:  # the main resource ignores status, and system metadata is kept from the stored object
            obj = copy.deepcopy(new)
            obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
            meta = obj["metadata"]
            for system_field in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
            ):
                if system_field in old["metadata"]:
                    meta[system_field] = old["metadata"][system_field]
                else:
                    meta.pop(system_field, None)
            if "status" in old:
                obj["status"] = copy.deepcopy(old["status"])
            else:
                obj.pop("status", None)
            if rtype is PODS and pod_spec_for_compare(obj.get("spec", {})) != pod_spec_for_compare(old.get("spec", {})):
                raise errors.invalid(
                    "Pod",
                    key[1],
                    "spec: Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`, "
                    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                    "(only additions to existing tolerations), `spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)",
                )
            if rtype.has_generation and obj.get("spec") != old.get("spec"):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            if rtype is NAMESPACES:
                label_namespace(obj)
        obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if obj == old:  # a no-op write: no new revision, no event, like etcd3's GuaranteedUpdate
            return old
        return self._commit(rtype, "MODIFIED", obj, old)

    def replace(self, rtype: ResourceType, key: Key, body: Any, subresource: str | None = None) -> Json:
        old = self._existing(rtype, key)
        new = self._check_type(rtype, body, key[0] or None)
        return self._write(rtype, old, new, subresource)

    def patch(self, rtype: ResourceType, key: Key, patch: Any, subresource: str | None = None) -> Json:
        old = self._existing(rtype, key)
        if not isinstance(patch, dict):
            raise errors.bad_request("the body of a merge patch must be a JSON object")
        return self._write(rtype, old, merge_patch(old, patch), subresource)

    def delete(self, rtype: ResourceType, key: Key, options: Json, grace_seconds: int | None) -> tuple[int, Json]:
        """Delete at once (as if the kubelet confirmed immediately) unless a bound pod is deleted with
        an explicit positive grace period: then it is marked terminating and removed when that ends."""
        old = self._existing(rtype, key)
        pre = options.get("preconditions") or {}
        check_preconditions(rtype, key, old, pre.get("uid"), pre.get("resourceVersion"))
        if grace_seconds is None and options.get("gracePeriodSeconds") is not None:
            grace_seconds = int(options["gracePeriodSeconds"])
        if rtype is PODS and grace_seconds and grace_seconds > 0 and old.get("spec", {}).get("nodeName"):
            if old["metadata"].get("deletionTimestamp"):
                return 200, old
            obj = copy.deepcopy(old)
            obj["metadata"]["deletionTimestamp"] = now_rfc3339(grace_seconds)
            obj["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
            obj = self._commit(rtype, "MODIFIED", obj, old)
            uid = obj["metadata"]["uid"]
            asyncio.get_running_loop().call_later(grace_seconds, self._finish_graceful_delete, key, uid)
            return 200, obj
        gone = self._commit(rtype, "DELETED", copy.deepcopy(old), old)
        if rtype is PODS:  # the pod registry returns the deleted object; the others a Status
            return 200, gone
        details = {"name": key[1], "kind": rtype.plural, "uid": gone["metadata"]["uid"]}
        if rtype.group:
            details["group"] = rtype.group
        return 200, errors.success_body(200, details)

    def _finish_graceful_delete(self, key: Key, uid: str) -> None:
        obj = self.tables[PODS.plural].objects.get(key)
        if obj is not None and obj["metadata"]["uid"] == uid:
            self._commit(PODS, "DELETED", copy.deepcopy(obj), obj)

    def bind(self, key: Key, binding: Any) -> Json:
        """pods/binding with kube-apiserver's checks, in its order; the target node is not looked up."""
        ns, name = key
        if not isinstance(binding, dict):
            raise errors.bad_request("the object provided is unrecognized (must be a JSON object)")
        meta = binding.get("metadata") or {}
        if meta.get("namespace") and meta["namespace"] != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if meta.get("name") != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        target = binding.get("target") or {}
        if not target.get("name"):
            raise errors.invalid("Binding", name, "target.name: Required value")
        if target.get("kind", "") not in ("", "Node"):
            raise errors.invalid(
                "Binding", name, f"target.kind: Invalid value: \"{target['kind']}\": must be empty or 'Node'"
            )
        old = self._existing(PODS, key)
        check_preconditions(PODS, key, old, meta.get("uid"), meta.get("resourceVersion"))
        if old["metadata"].get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if old.get("spec", {}).get("nodeName"):
            assigned = old["spec"]["nodeName"]
            raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{assigned}"')
        pod = copy.deepcopy(old)
        pod["spec"]["nodeName"] = target["name"]
        if meta.get("annotations"):
            pod["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        conditions = [c for c in pod.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(),
            }
        )
        pod["status"]["conditions"] = conditions
        self._commit(PODS, "MODIFIED", pod, old)
        return errors.success_body(201)

    # -- watch ------------------------------------------------------------------------------------

    def subscribe(
        self, rtype: ResourceType, namespace: str | None, match: Matcher, resource_version: str, initial: bool
    ) -> tuple[list[tuple[str, Json]], Watch]:
        """Open a watch: the events to send first (a synthetic ADDED per object when `initial`, else
        the history after `resource_version`) and the registered Watch whose queue gets the rest."""
        table = self.tables[rtype.plural]
        watch = Watch(rtype, namespace, match)
        if initial:
            first = [("ADDED", obj) for _, obj in sorted(table.objects.items()) if watch.visible(obj)]
        else:
            since = int(resource_version)
            if since < table.compacted_rv:
                raise errors.expired(f"too old resource version: {since} ({table.compacted_rv})")
            first = [seen for ev in table.history if ev.rv > since if (seen := watch.translate(ev)) is not None]
        table.watches.add(watch)
        return first, watch

    def unsubscribe(self, watch: Watch) -> None:
        self.tables[watch.rtype.plural].watches.discard(watch)

    def compact(self) -> int:
        """Forget every event: a watch from any revision older than now gets 410 Expired."""
        for table in self.tables.values():
            table.history.clear()
            table.compacted_rv = self.rv
        return self.rv

    def break_watches(self, plural: str | None = None) -> int:
        closed = 0
        for table in self.tables.values():
            if plural is None or table.rtype.plural == plural:
                for watch in table.watches:
                    watch.queue.put_nowait(None)
                    closed += 1
        return closed
