"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, installed with
apt-get if missing, started with initdb/pg_ctl in a temporary folder on a free local port
(as the ``postgres`` user when running as root, which initdb refuses), stopped at the end.

``start_postgres`` raises ``PostgresUnavailable`` with the installer's own output when the
server truly cannot be had; fixtures turn that into a skip that says why.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.ports import free_port


class PostgresUnavailable(RuntimeError):
    pass


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _apt_install() -> None:
    if os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL is not installed and apt-get needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "postgresql"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 and command[1] == "install":
            tail = (done.stdout + done.stderr)[-2000:]
            raise PostgresUnavailable(f"apt-get install -y postgresql failed:\n{tail}")


# ./test.sh runs two pytest processes side by side, and on a fresh machine both may be the
# first to need the server (the store's unit tests, the store-keys e2e module): one installs,
# the other waits for it instead of failing on dpkg's lock.
INSTALL_LOCK = Path(tempfile.gettempdir()) / "serve-app-postgresql-install.lock"


def ensure_installed() -> Path:
    """The folder of initdb/pg_ctl, installing Debian's package first if needed."""
    if (found := _bin_dir()) is not None:
        return found
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (found := _bin_dir()) is None:
            _apt_install()
            found = _bin_dir()
    if found is None:
        raise PostgresUnavailable("apt-get installed postgresql but pg_ctl is not found")
    return found


@dataclass(frozen=True)
class PostgresServer:
    port: int
    data_dir: Path
    pg_ctl: str = "pg_ctl"
    options: str = ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> None:
        subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", self.url(database), "-c", sql],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def stop(self) -> None:
        """Shuts the server down as an operator's restart would (``-m fast``: open
        connections are closed, clients see them drop)."""
        _run([self.pg_ctl, "-D", str(self.data_dir), "-m", "fast", "-w", "stop"], "stop")

    def start(self) -> None:
        """Starts it again on the same port and data: what a restart brings back."""
        log = str(self.data_dir.parent / "log")
        _run([self.pg_ctl, "-D", str(self.data_dir), "-o", self.options, "-l", log, "-w", "start"],
             "start")  # fmt: skip


def _as_postgres(command: list[str]) -> list[str]:
    """Runs ``command`` as the postgres user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(_as_postgres(command), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise PostgresUnavailable(f"{what} failed:\n{(done.stdout + done.stderr)[-2000:]}")


@contextlib.contextmanager
def start_postgres() -> Iterator[PostgresServer]:
    """A fresh server in a new temporary folder (trust authentication on 127.0.0.1 only),
    deleted afterwards. The folder is under /tmp itself: the postgres user must reach it."""
    bin_dir = ensure_installed()
    base = Path(tempfile.mkdtemp(prefix="serve-app-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresUnavailable("running as root and there is no postgres user") from exc
        os.chown(base, user.pw_uid, user.pw_gid)
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
    _run([*initdb, "-E", "UTF8", "--no-sync"], "initdb")
    port = free_port()
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    server = PostgresServer(port, data, str(bin_dir / "pg_ctl"), options)
    server.start()
    try:
        yield server
    finally:
        subprocess.run(
            _as_postgres([server.pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(base, ignore_errors=True)
