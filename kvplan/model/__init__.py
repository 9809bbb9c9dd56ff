"""What is planned: ModelSpec (spec.py) and the layer specs whose costs add up to a model's cache (layers.py)."""
