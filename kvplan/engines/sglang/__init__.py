"""SGLang: its rules (engine.py), start-up budget (boot), what a rank holds (layout) and its log check (reconcile)."""
