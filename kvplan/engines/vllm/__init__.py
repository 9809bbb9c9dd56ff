"""vLLM: its rules (engine.py), start-up budget (overhead, non_torch, boot), block pool (pool), --max-model-len auto
(autofit), cache dtype, and its log check (reconcile)."""
