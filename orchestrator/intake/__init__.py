"""The intake: every text placed in a request passes here, whatever face or mode sent it.

- :mod:`orchestrator.intake.admit` — the one function (:func:`admit_text`) and the choke
  point (:func:`admit`): a request goes on the wire (``models/server.py``) only as an
  :class:`Admitted` request, which only :func:`admit` makes. Registered key values are
  masked, credential content withheld, and, where the run is anonymous, identifying
  spellings redacted and the leak scan run (a hit stops that request).
- :mod:`orchestrator.intake.fold` — text as a reader sees it (NFKC, invisible characters
  removed, confusable letters folded to their Latin look-alikes).
- :mod:`orchestrator.intake.anonymity` — finding a participant's name however it is spelled.
- :mod:`orchestrator.intake.diff` — ``--diff``: credential files withheld by name, per file.

docs/security.md says what it promises.
"""

from __future__ import annotations

from orchestrator.intake.admit import (
    Admission,
    Admitted,
    Leaked,
    Policy,
    admit,
    admit_text,
)
from orchestrator.intake.anonymity import Anonymity

__all__ = ["Admission", "Admitted", "Anonymity", "Leaked", "Policy", "admit", "admit_text"]
