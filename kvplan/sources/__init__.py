"""Layer 4 of 14, sources: finding a model. The bundled catalog (catalog.py, model_specs/), the Hugging Face
Hub (hub.py, hub_calls.py, hub_headers.py), local folders and names (resolve.py), writing a catalog
entry (importer.py), and the name an engine loads a spec by (origin.py). Above readers: a config found
is read by kvplan.readers."""
