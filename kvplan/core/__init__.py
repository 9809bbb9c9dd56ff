"""Layer 1 of 14, core: primitives every layer uses. Errors, units, integer math, dtypes, the monotone
search, safe text for a terminal, atomic files, the gc pause for bulk work, release numbers. Imports nothing of kvplan
outside core (tests/test_layers.py)."""
