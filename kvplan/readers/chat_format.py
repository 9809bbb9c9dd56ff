"""A model's chat format: how a served chat request becomes prompt tokens, where that is not the HF tokenizer's Jinja
chat template. gpt-oss speaks OpenAI's harmony format, which its engines render with the openai_harmony library
(vllm-project/vllm@99c5632fc2d252a6f25afa76347df392eb898c42:vllm/entrypoints/openai/serving_chat.py: `use_harmony` when
the config's model_type is gpt_oss). Read by kvplan.speed.frontend (what an engine's front end does with a request)."""

from __future__ import annotations

HARMONY_FAMILIES = frozenset({"gpt_oss"})  # model_types whose chat format is harmony


def chat_format(family: str | None) -> str:
    """"harmony" for a model of a harmony family, "template" (the tokenizer's Jinja chat template) otherwise."""
    return "harmony" if family in HARMONY_FAMILIES else "template"
