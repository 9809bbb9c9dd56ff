"""What a served run's API server does with a request before the engine sees it: the endpoint a corpus point
states (`endpoint_of`) and whether an engine's front end renders a model's chat request without its Python chat
template and tokenizer (`native_chat`), in which case a burst's requests carry no `ingress` wait
(kvplan.speed.load.ingress_queue)."""

from __future__ import annotations

ENDPOINTS = ("chat", "completions")  # /v1/chat/completions, /v1/completions


def endpoint_of(p: dict) -> str | None:
    """The point's `endpoint` (chat | completions), None where not stated; any other value is refused."""
    value = p.get("endpoint")
    if value is None:
        return None
    if str(value) not in ENDPOINTS:
        raise ValueError(f"endpoint {value!r}: one of {', '.join(ENDPOINTS)}")
    return str(value)


# Chat formats (kvplan.readers.chat_format) whose chat requests an engine's API server renders to token ids without
# its Python chat template and tokenizer, per engine: vLLM renders harmony (gpt-oss's) through
# openai_harmony (Rust), `render_for_completion` returning token ids, in place of `_preprocess_chat` (the HF
# tokenizer's Jinja chat template, then its tokenizer): `self.use_harmony = self.model_config.hf_config.model_type ==
# "gpt_oss"` and the `# For GPT-OSS.` branch of create_chat_completion (vllm-project/vllm@
# 99c5632fc2d252a6f25afa76347df392eb898c42:vllm/entrypoints/openai/serving_chat.py; the corpus's runs are 0.10.2,
# assumed, not read, to take the same branch). Only a stated chat endpoint (`endpoint: chat`)
# reads it: /v1/completions tokenizes a gpt-oss prompt as any other. Applied by kvplan.speed.fit.Built (Load.templated).
NATIVE_CHAT = {"vllm": frozenset({"harmony"})}


def native_chat(engine: str, chat_format: str, endpoint: str | None) -> bool:
    """Whether `engine`'s front end renders a chat request in `chat_format` (kvplan.readers.chat_format) without its
    Python template."""
    return endpoint == "chat" and chat_format in NATIVE_CHAT.get(engine, frozenset())
