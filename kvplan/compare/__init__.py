"""Layer 9 of 14, compare: choosing among deployments with an engine. Trying candidates and collecting
refusals (candidates.py: fit's smallest fit and layout search use it too), sweeps (sweep.py), the
cheapest deployment for a target (cheapest.py) and by replicas (replicas.py), the buyer's headline
(procurement.py). Above engines: every candidate is planned by a configured engine."""
