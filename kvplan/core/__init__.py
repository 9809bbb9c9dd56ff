"""Primitives every layer uses: errors, units, integer math, dtypes, the monotone search, safe text, atomic files. No kvplan imports outside core."""
