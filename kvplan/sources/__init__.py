"""Finding a model: the bundled catalog, the Hugging Face Hub (config and safetensors headers), local folders and imports."""
