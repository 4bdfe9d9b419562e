"""A small, honest fake of kube-apiserver for tests, run as its own process over HTTP.

Start: ``python -m tests.fake_kube --port N [--token T] [--no-podgroups] [--bookmark-interval S]
[--history N] [--tls-cert F --tls-key F [--client-ca F]]``; in tests use the ``fake_kube`` fixture
(tests/plugins/fake_kube.py; ``FakeKube(..., tls=FakeKubeTLS.create(...))`` for https).

Covered, with the real API's JSON wire formats:
- core/v1 nodes and namespaces (cluster-scoped; a namespace is labelled kubernetes.io/metadata.name
  with its name on every write and created Active), pods and persistentvolumeclaims (namespaced, also
  listed/watched across namespaces at /api/v1/pods and /api/v1/persistentvolumeclaims; claims are
  created Pending and never bound), services and replicationcontrollers (namespaced, listed/watched
  across namespaces too), apps/v1 replicasets and statefulsets (likewise), all stored as written (no
  cluster IPs, no controllers: nothing creates their pods), policy/v1 poddisruptionbudgets, and the
  PodGroup CRD
  scheduling.x-k8s.io/v1alpha1 podgroups (off with --no-podgroups or POST /_fake/podgroups
  {"enabled": false}: its URLs and its discovery document then answer 404 like a cluster without
  the CRD).
- GET, LIST (labelSelector incl. set-based, fieldSelector with each resource's supported field labels
  -- e.g. spec.nodeName, status.phase for pods -- else 400; limit/continue over a consistent snapshot,
  410 once compacted; resourceVersion ahead of the server: 504 "Too large resource version"),
  POST (uid, creationTimestamp, resourceVersion; generateName; 409 AlreadyExists), PUT (409 Conflict on
  a stale metadata.resourceVersion; custom resources require one, 422), PATCH with merge-patch+json,
  and strategic-merge-patch+json applied as a plain merge patch (lists are replaced, no $patch keys;
  other patch types: 415), DELETE (404; preconditions; pods return the object, others a Status).
- The status subresource (GET/PUT/PATCH .../status) for every resource. As on the real server, a write
  to the main resource ignores .status and a write to /status changes only .status; POST resets the
  status of pods (to phase Pending), PDBs (zero counts) and podgroups (none); nodes keep theirs.
  A no-op write makes no new revision and no event. Pod updates may not change spec fields other
  than images, activeDeadlineSeconds, tolerations and schedulingGates (422, so nodeName changes only
  through the binding). generation is kept for PDBs, podgroups, replicationcontrollers, replicasets
  and statefulsets.
- pods/binding with the real checks in the real order: 400 name mismatch, 404 missing pod, 409 UID /
  resourceVersion precondition, 409 pod being deleted, 409 already assigned (even to the same node);
  the node is not looked up. Success: spec.nodeName, binding annotations, PodScheduled=True, 201 Status.
- One global resourceVersion counter; per-resource bounded event history (--history).
- WATCH (?watch=1): resourceVersion unset or "0" sends a synthetic ADDED per current object first;
  resourceVersion=N replays history after N, or answers 200 + one ERROR event (Status 410 Expired,
  "too old resource version: N (M)") and closes when N is older than the history; selectors apply,
  with objects entering/leaving the selection sent as ADDED/DELETED; BOOKMARKs every
  --bookmark-interval seconds when allowWatchBookmarks=true; sendInitialEvents=true ends the initial
  ADDEDs with the k8s.io/initial-events-end bookmark; timeoutSeconds closes the stream.
- Bearer-token auth (--token): 401 Status without it (/healthz, /readyz, /livez, /version are open).
- TLS (--tls-cert/--tls-key) and client-certificate authentication (--client-ca: the handshake fails
  without a certificate signed by that CA).
- Pod create defaults relevant to scheduling: schedulerName, priority 0, preemptionPolicy,
  restartPolicy, dnsPolicy, terminationGracePeriodSeconds, the DefaultTolerationSeconds NoExecute
  tolerations. Discovery: /version, /api, /apis, /api/v1, /apis/<group>/<version>.
- Admin endpoints under /_fake/ (no auth): GET/DELETE stats (request counts per verb and resource,
  open watches, object counts, resourceVersion), POST compact, POST break-watches[?resource=pods],
  POST latency {"seconds", "match" (only requests whose "METHOD path?query" has it; carried out after
  the delay even when the client gave up), "commit" (false: answer 504 instead, changing nothing)},
  POST/DELETE faults {"code", "count" (null = forever), "match"}, POST
  podgroups {"enabled"}, POST token {"token"} (rotates the bearer token).

Not covered (on purpose): other resources; Services' IP allocation and endpoints, workload
controllers (no pods are created for a ReplicaSet); namespaces' lifecycle (any namespace name is accepted for
namespaced objects whether or not a Namespace exists, deleting one deletes nothing in it, no finalize
or status subresource),
admission plugins beyond the defaults above (no priority-class resolution, quota, limit ranges),
field validation and full defaulting, QoS class, managedFields and server-side apply, JSON patch,
finalizers, deletecollection, resourceVersionMatch=Exact and list at an old resourceVersion (lists are
always at the current revision), the legacy /api/v1/watch/ paths, protobuf, HTTP/2, RBAC, table output.
DELETE removes a pod at once unless it is bound and gracePeriodSeconds > 0 is given, in which case it is
marked terminating (deletionTimestamp, MODIFIED) and removed when the grace period ends -- the real
default would wait for a kubelet. Watch streams end cleanly (no connection resets).
"""
