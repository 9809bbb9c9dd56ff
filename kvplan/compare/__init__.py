"""Many plans side by side: sweeps, the cheapest deployment for a target, replicas, the buyer's headline."""
