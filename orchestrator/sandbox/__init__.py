"""Running untrusted programs behind a boundary: bench checks over model-written answers, agent
CLIs as contestants, and the child processes that parse what they print.

- :mod:`orchestrator.sandbox.process`: a child process with a time limit, memory and file-size
  rlimits, capped output, killed with its whole process group;
- :mod:`orchestrator.sandbox.bwrap`: the bubblewrap command line that confines it (the trial
  folder writable, the rest read-only or hidden, no network, a private ``/tmp``);
- :mod:`orchestrator.sandbox.environment`: the environment it gets (no key values).

docs/security.md says what is and is not confined.
"""
