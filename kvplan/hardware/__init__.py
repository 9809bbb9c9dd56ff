"""Layer 5 of 14, hardware: what kvplan plans on. GPU profiles (profiles/*.yaml, each figure sourced; gpus.py
loads them) and prices (prices.py). Imports core only."""
