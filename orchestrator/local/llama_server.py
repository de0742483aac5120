"""How orch runs llama.cpp's own HTTP server: its command line, the ``orch-plain`` prompt
format for base models, and the portable path. The server is the prebuilt one
(:mod:`orchestrator.local.prebuilt`, the ``xllamacpp`` wheel) or a ``llama-server`` compiled by
``orch local build``; both take the same flags.

``llama-server`` decodes its ``--parallel`` slots together (continuous batching), so N legs
on the one server share each forward pass instead of queueing. Each slot gets ``n_ctx`` tokens
of context (``-c`` is ``n_ctx × slots``).

``orch-plain``: the built-in Gemma 3 270M is a *base* model: wrapped in a chat template it
loops on turn markers; given the conversation as plain text it continues it. The template
below joins the non-system messages with blank lines, and the ``local`` plugin sends stop
strings chosen by how the prompt ends (:func:`plain_stop`): one paragraph for an opening prompt that
stops mid-sentence, up to two blank lines in a row for one that ends a paragraph — never
the blank line before the answer's first line.

The portable path: llama.cpp repacks weights into "extra buffer types" (AMX tiles, AVX-512
layouts) when the CPU advertises them. Some VMs advertise AMX and fault on it (SIGILL). The
portable path turns repacking off (``--no-repack``; ``LLAMA_ARG_REPACK=false`` in the
environment says the same to any server, the stand-in of the tests too).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from orchestrator.local.prebuilt import MODULE as PREBUILT_MODULE

PLAIN = "orch-plain"
# Where a base model's answer ends. A prompt that stops mid-sentence ("The three primary
# colours are") is continued on its own line: one paragraph, to the first blank line. A prompt
# that ends a sentence, a heading or a fence (an instruction, every council prompt) is
# continued after a blank line, which "\n\n" would take for the end: an empty answer. There
# the answer ends at two blank lines in a row (or at local.max_tokens).
PLAIN_STOP_INLINE = ["\n\n"]
PLAIN_STOP = ["\n\n\n"]
_ENDS_A_PARAGRAPH = re.compile(r"(?:[.!?:;)\]}>\"'`*]|^#+ [^\n]*|^[-*] [^\n]*)\s*\Z", re.M)


def plain_stop(prompt: str) -> list[str]:
    """The stop strings for a plain-text prompt, by how it ends (see above). Trailing
    whitespace does not count: the template trims it, the model never sees it."""
    text = prompt.rstrip()
    if text and not _ENDS_A_PARAGRAPH.search(text):
        return list(PLAIN_STOP_INLINE)
    return list(PLAIN_STOP)


PLAIN_TEMPLATE = (
    "{%- set ns = namespace(first=true) -%}"
    "{%- for message in messages -%}"
    "{%- if message.role != 'system' and message.content is string"
    " and message.content | trim -%}"
    "{%- if not ns.first -%}{{ '\\n\\n' }}{%- endif -%}"
    "{{ message.content | trim }}"
    "{%- set ns.first = false -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
)
FAST, PORTABLE = "fast", "portable"
PREBUILT = [sys.executable, "-m", PREBUILT_MODULE]  # xllamacpp: llama.cpp's server, no compile
PORTABLE_FLAGS = ["--no-repack"]
PORTABLE_ENV = {"LLAMA_ARG_REPACK": "false"}


def argv(program: list[str], *, model: Path, alias: str, port: int, host: str, slots: int,
         n_ctx: int, threads: int, chat_format: str | None, template_file: Path,
         path: str, threads_batch: int | None = None) -> list[str]:
    """The ``llama-server`` command for one model with ``slots`` parallel slots. ``program``:
    the compiled binary (``[path]``), or the prebuilt server that takes the same flags
    (:data:`PREBUILT`, :mod:`orchestrator.local.prebuilt`).

    ``--threads`` computes steps of one token (one busy slot); ``--threads-batch`` steps of
    several (several busy slots, or a prompt): llama.cpp picks by the step's token count."""
    args = [*program, "--model", str(model), "--alias", alias, "--host", host,
            "--port", str(port), "--parallel", str(slots), "--cont-batching",
            "--ctx-size", str(n_ctx * slots), "--threads", str(threads),
            "--threads-batch", str(threads_batch or threads), "--no-webui", "--log-timestamps"]
    if chat_format == PLAIN:
        args += ["--jinja", "--chat-template-file", str(template_file)]
    elif chat_format:  # one of llama.cpp's named templates (chatml, llama3, ...)
        args += ["--no-jinja", "--chat-template", chat_format]
    else:
        args += ["--jinja"]
    if path == PORTABLE:
        args += PORTABLE_FLAGS
    return args
