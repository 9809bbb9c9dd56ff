"""Hugging Face transformers' own caches as an engine (engine.py)."""
