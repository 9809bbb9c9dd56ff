"""kvplan: KV-cache capacity planning for LLM serving (pure core; the CLI lives in kvplan.cli)."""

__version__ = "0.1.0"
