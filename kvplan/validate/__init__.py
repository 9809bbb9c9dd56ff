"""Layer 13 of 14, validate: check kvplan's predictions against a real torch decode (`kvplan validate`).

A decoder is built from a ModelSpec with random weights and the model's real cache geometry
(decoder.py), its preallocated cache and every allocation are measured (measure.py), and the
measurements are compared with the planner's own arithmetic (run.py). Importing this package
does not import torch; its modules do.
"""
