"""llama.cpp's own HTTP server without a compile step: ``python -m orchestrator.local.prebuilt
[llama-server flags]`` serves a GGUF with the prebuilt ``xllamacpp`` wheel (llama.cpp's
``server`` compiled into a Python extension, manylinux CPU builds on PyPI).

It takes the flags orch gives a compiled ``llama-server`` (:func:`llama_server.argv`), so the
supervisor runs either the same way: the same HTTP API (``/v1/models``, ``/v1/chat/completions``,
``/slots``), the same slots and context per slot, the same ``orch-plain`` template, the same
log lines. It is a child process of the supervisor like ``llama-server``: a crash in llama.cpp
is a signal the supervisor diagnoses, and SIGTERM stops it.

The portable path: ``--no-repack`` (or ``LLAMA_ARG_REPACK=false`` in the environment, which
``llama-server`` reads itself) turns off llama.cpp's weight repacking into AMX / AVX-512
layouts (``no_extra_bufts``).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from pathlib import Path

MODULE = "orchestrator.local.prebuilt"
PACKAGE = "xllamacpp"
IN_USE = "address already in use"  # what manager reads in the log to pick another port


def parser() -> argparse.ArgumentParser:
    """The subset of ``llama-server``'s flags that :func:`llama_server.argv` writes."""
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    p.add_argument("--model", required=True)
    p.add_argument("--alias", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--ctx-size", type=int, default=0)
    p.add_argument("--threads", type=int, default=-1)
    p.add_argument("--threads-batch", type=int, default=None)
    p.add_argument("--cont-batching", action="store_true")
    p.add_argument("--no-webui", action="store_true")
    p.add_argument("--log-timestamps", action="store_true")
    p.add_argument("--jinja", action="store_true")
    p.add_argument("--no-jinja", action="store_true")
    p.add_argument("--chat-template", default=None)
    p.add_argument("--chat-template-file", default=None)
    p.add_argument("--no-repack", action="store_true")
    return p


def params(args: argparse.Namespace):
    """xllamacpp's ``CommonParams`` (llama.cpp's ``common_params``) for these flags."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.model_alias = {args.alias}
    p.hostnames = [args.host]
    p.port = args.port
    p.n_parallel = args.parallel
    p.n_ctx = args.ctx_size  # shared by the slots: n_ctx per slot × slots, as llama-server
    p.kv_unified = False  # each slot its own n_ctx, as the compiled server of orch
    p.cont_batching = True
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads_batch or args.threads
    p.ui = False
    p.endpoint_slots = True  # manager asks GET /slots before it restarts for more slots
    if args.chat_template_file:
        p.use_jinja = True
        p.chat_template = Path(args.chat_template_file).read_text(encoding="utf-8")
    elif args.chat_template:
        p.use_jinja = not args.no_jinja
        p.chat_template = args.chat_template
    else:
        p.use_jinja = True
    if args.no_repack or os.environ.get("LLAMA_ARG_REPACK", "").lower() in ("0", "false",
                                                                               "off", "no"):
        p.no_extra_bufts = True
    return p


def _listening(host: str, port: int) -> bool:
    """Someone else listens on the port (llama.cpp only says it could not bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        import xllamacpp
    except ImportError:
        print(f"error: the prebuilt server needs {PACKAGE}: pip install -e '.[local]'",
              flush=True)
        return 3
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    try:
        server = xllamacpp.Server(params(args))
    except Exception as exc:  # llama.cpp's start failed: one line in the log, exit 1
        why = (f"port {args.port} on {args.host}: {IN_USE}" if _listening(args.host, args.port)
               else f"{type(exc).__name__}: {exc} (the lines above say why)")
        print(f"error: the prebuilt llama.cpp server did not start: {why}", flush=True)
        return 1
    print(f"prebuilt llama.cpp server ({PACKAGE} {getattr(xllamacpp, '__version__', '?')}) "
          f"listening on {server.listening_address}", flush=True)
    done.wait()
    sys.stdout.flush()
    # llama.cpp's server threads do not join on interpreter exit: leave at once, as the
    # compiled server does on SIGTERM (nothing of orch's is written by this process)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
