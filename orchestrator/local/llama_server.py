"""llama.cpp's OpenAI-compatible server with one addition: the ``orch-plain`` chat format.

``python -m orchestrator.local.llama_server --config_file FILE`` is ``python -m
llama_cpp.server`` plus this format. The built-in Gemma 3 270M is a *base* model: it has no
chat template and, wrapped in one, it loops on turn markers. Given the conversation as plain
text it does what a base model does well — it continues the text — and it stops at the first
blank line, so an answer is one paragraph, not a page of repetition. System messages are left
out (as Gemma's own template does): a base model would continue *their* style, not the
briefing.
"""

from __future__ import annotations

from typing import Any

PLAIN = "orch-plain"


def format_plain(messages: list[dict[str, Any]], **kwargs: Any):
    """The conversation's text in order (system messages left out), separated by blank
    lines; the model continues it."""
    from llama_cpp.llama_chat_format import ChatFormatterResponse

    parts = []
    for message in messages:
        if message.get("role") == "system":
            continue
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str) and content.strip():
            parts.append(content.strip())
    return ChatFormatterResponse(prompt="\n\n".join(parts), stop=["\n\n"])


def main() -> None:
    from llama_cpp.llama_chat_format import register_chat_format
    from llama_cpp.server.__main__ import main as serve

    register_chat_format(PLAIN)(format_plain)
    serve()


if __name__ == "__main__":
    main()
