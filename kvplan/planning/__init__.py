"""Layer 6 of 14, planning: one plan's arithmetic and the deployments it runs on. KV profiles (profile.py),
budgets, usage and verdicts (plan.py), tp/pp/dp/ep/dcp deployments and which a model can run (deploy.py),
what each rank holds (layout.py), a drafter added to the model (speculative.py). No engine's rules:
those are kvplan.engines', which call into this layer."""
