"""``python -m orchestrator.daemon serve [--idle MINUTES]``: the daemon in the foreground.

``orch serve start`` runs this (in the background, or in its own place with
``--foreground``), as does a run that starts one (autostart.py): the daemon is its own
program, so ``orch``'s command line never imports it."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from orchestrator.errors import OrchError

    parser = argparse.ArgumentParser(prog="python -m orchestrator.daemon")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--idle", type=float, default=None, metavar="MINUTES")
    args = parser.parse_args(argv)
    from orchestrator.daemon.autostart import AFTER_ENV, LOCK_FD_ENV, wait_for_starter
    from orchestrator.daemon.environment import start_clean

    if argv is None:  # the real entry point (never inside a test's process)
        start_clean((LOCK_FD_ENV, AFTER_ENV), sys.argv[1:])  # its environment holds no key
    from orchestrator.daemon.server import run

    try:
        wait_for_starter()  # started by a run (daemon: auto): warm up once it has ended
        run(args.idle)
    except OrchError as exc:
        print(f"orch serve: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
