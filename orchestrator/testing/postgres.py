"""A throwaway PostgreSQL server for tests and benchmarks: ``initdb`` into a temporary
directory, ``pg_ctl start`` on a loopback port, trust authentication, gone at ``close()``.

The binaries come from ``ORCH_PG_BINDIR``, else ``pg_ctl`` on PATH, else Debian's
``/usr/lib/postgresql/<version>/bin`` (``.ci/run`` installs the ``postgresql`` package when
none is there). PostgreSQL refuses to run as root, so under root the cluster runs as the
``postgres`` user (else ``nobody``) in a directory handed to it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def bindir() -> Path | None:
    """Where initdb, pg_ctl and postgres are; None when this machine has none."""
    candidates = []
    if os.environ.get("ORCH_PG_BINDIR"):
        candidates.append(Path(os.environ["ORCH_PG_BINDIR"]))
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(found).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                         reverse=True)
    for path in candidates:
        if all((path / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return path
    return None


def unavailable() -> str | None:
    """Why no cluster can start here (a skip reason), else None."""
    if bindir() is None:
        return ("no PostgreSQL binaries (initdb, pg_ctl): install Debian's postgresql "
                "package or set ORCH_PG_BINDIR")
    if os.geteuid() == 0 and _account() is None:
        return "running as root and no unprivileged account (postgres, nobody) to run PostgreSQL"
    return None


def _account() -> pwd.struct_passwd | None:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One PostgreSQL server. ``durable=False`` (tests) turns fsync off; the benchmark keeps
    PostgreSQL's defaults."""

    def __init__(self, *, durable: bool = False) -> None:
        why = unavailable()
        if why:
            raise RuntimeError(why)
        self.bin = bindir()
        self.root = Path(tempfile.mkdtemp(prefix="orch-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.durable = durable
        self._run_as = _account() if os.geteuid() == 0 else None
        if self._run_as is not None:
            os.chown(self.root, self._run_as.pw_uid, self._run_as.pw_gid)
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--no-sync", "--locale=C")
        self.start()

    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        kwargs = {}
        if self._run_as is not None:
            kwargs = {"user": self._run_as.pw_uid, "group": self._run_as.pw_gid,
                      "extra_groups": []}
        env = {**os.environ, "HOME": str(self.root), "LC_ALL": "C"}
        proc = subprocess.run([str(self.bin / tool), *args], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=120, **kwargs)
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} failed ({proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
        return proc

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 " \
                  "-c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                 "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)
