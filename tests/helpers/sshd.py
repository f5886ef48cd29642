"""A real OpenSSH server on 127.0.0.1 for the tests: throwaway keys, a temporary client config."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def missing_reason() -> str | None:
    if SSHD is None:
        return "OpenSSH server not installed (apt-get install openssh-server; .ci/run installs it)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "OpenSSH client not installed"
    return None


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    config: Path  # client config: Host "testhost"
    host: str = "testhost"

    def options(self) -> tuple[str, ...]:
        return ("-F", str(self.config))

    def connection(self, timeout: float = 10.0):
        """How mstop reaches this server: its ssh config file, and ``timeout`` seconds to connect."""
        from mstop.sources import Connection

        return Connection(self.options(), timeout)

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections (children of the listening daemon)."""
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == self.proc.pid:
                    out.append(int(d))
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp: Path, force_command: str | None = None, *, port: int | None = None) -> Server:
    """A server on a free port (or ``port``, with the keys already in ``tmp``: a host's sshd come back);
    ``force_command``: what every session runs whatever the client asked (sshd's ``ForceCommand``: a host
    whose remote side misbehaves, played behind a real OpenSSH)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        if not (tmp / name).exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True)
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    os.chmod(tmp / "authorized_keys", 0o600)
    port = port or free_port()
    user = getpass.getuser()
    (tmp / "sshd_config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {tmp / 'host_key'}
AuthorizedKeysFile {tmp / 'authorized_keys'}
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
StrictModes no
UsePAM no
PidFile {tmp / 'sshd.pid'}
LogLevel ERROR
MaxStartups 100
MaxSessions 100
""" + (f"ForceCommand {force_command}\n" if force_command else ""))
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(tmp / "sshd_config")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd did not start: {proc.stderr.read().decode()}") from None
            time.sleep(0.05)
    (tmp / "ssh_config").write_text(f"""Host testhost
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {tmp / 'client_key'}
    IdentitiesOnly yes
    UserKnownHostsFile {tmp / 'known_hosts'}
    StrictHostKeyChecking no
    LogLevel ERROR
Host deadport
    HostName 127.0.0.1
    Port {free_port()}
    User {user}
    IdentityFile {tmp / 'client_key'}
    UserKnownHostsFile {tmp / 'known_hosts'}
    StrictHostKeyChecking no
""")
    return Server(proc, port, tmp / "ssh_config")


def alias(server: Server, names: str) -> str:
    """The client config block that reaches ``server`` as the hosts ``names`` (an ssh ``Host`` pattern, such
    as ``lo*``: any number of "hosts" that are all this machine), to append to a config file."""
    text = server.config.read_text()
    return text[text.index("Host testhost"):text.index("Host deadport")].replace("Host testhost", f"Host {names}")


def kill(server: Server) -> None:
    """The host gone: its sshd and every session it serves killed (its clients see the link drop)."""
    sessions = server.session_pids()
    server.proc.kill()
    server.proc.wait()
    for pid in sessions:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def stop(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.proc.kill()


def assert_same_summary(remote: dict, local: dict, remote_dir: str) -> None:
    """``summary --json`` read over ssh equals the local read: its run_dir is ``remote_dir``; alerts compared
    by what and where (their words hold ages in seconds, read a moment apart)."""
    remote, local = dict(remote), dict(local)
    assert remote.pop("run_dir") == remote_dir
    local.pop("run_dir")
    assert [(a["kind"], a["rank"], a["step"]) for a in remote.pop("alerts")] == \
        [(a["kind"], a["rank"], a["step"]) for a in local.pop("alerts")]
    assert remote == local


def start_or_skip(tmp: Path) -> Server:
    """:func:`start`, or the test skipped with why the server cannot run here."""
    import pytest

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    return start(tmp)
