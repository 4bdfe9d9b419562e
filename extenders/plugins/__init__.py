"""Scheduling plug-ins, one module (or package) per plug-in named after what it does, as
kube-scheduler lays them out; ``extenders.plugins.registry`` lists them by name."""
