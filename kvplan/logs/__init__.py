"""Engine start-up logs: parse them (parse.py) and reconcile their numbers with kvplan's (reconcile.py)."""
