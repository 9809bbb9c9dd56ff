"""Layer 2 of 14, model: what is planned. ModelSpec and its weights by role (spec.py) and the layer specs
whose costs add up to a model's cache (layers.py). Imports core only."""
