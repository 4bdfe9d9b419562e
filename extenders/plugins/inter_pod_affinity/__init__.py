"""Inter-pod affinity: the filter (required terms) and the score (preferred terms)."""
