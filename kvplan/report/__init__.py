"""Layer 12 of 14, report: plans, sweeps and simulations for people and files. Text tables and JSON dicts
(text.py), --explain (explain.py), CSV/JSON rows (export.py), HTML pages (html.py, simulation.py).
Units appear here and in the CLI only."""
