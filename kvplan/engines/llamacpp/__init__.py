"""llama.cpp: its rules, cells and buffers (engine.py) and its log check (reconcile)."""
