"""Node resources: the fit filter, and the allocation scorers sharing one view of requests."""
