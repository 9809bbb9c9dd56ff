"""TensorRT-LLM: its rules and KV cache manager budget (engine.py)."""
