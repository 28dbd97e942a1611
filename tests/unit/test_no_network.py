"""The suite runs offline: sockets refuse every address but loopback (RELIABILITY 7.5)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from ..conftest import NetworkBlocked, is_loopback

#: Addresses outside this machine: a private IPv4 that drops packets (a real connect
#: would hang until its timeout), documentation IPv6, an IPv4-mapped public address and
#: a host name (never resolved).
REMOTE = [
    (socket.AF_INET, ("10.255.255.1", 9)),
    (socket.AF_INET, ("example.com", 80)),
    (socket.AF_INET6, ("2001:db8::1", 9, 0, 0)),
    (socket.AF_INET6, ("::ffff:10.255.255.1", 9, 0, 0)),
]


@pytest.mark.parametrize(("family", "address"), REMOTE)
def test_non_loopback_connect_raises_at_once(family: int, address: tuple[object, ...]) -> None:
    """connect and connect_ex to a non-loopback address raise NetworkBlocked without
    waiting for the network (the socket's own timeout is 5 s)."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        started = time.monotonic()
        with pytest.raises(NetworkBlocked, match="must not use the network"):
            sock.connect(address)
        with pytest.raises(NetworkBlocked):
            sock.connect_ex(address)
        assert time.monotonic() - started < 0.5


def test_asyncio_connections_are_blocked_too() -> None:
    """asyncio's open_connection goes through the same socket methods."""

    async def reach() -> None:
        await asyncio.wait_for(asyncio.open_connection("10.255.255.1", 9), 5.0)

    started = time.monotonic()
    with pytest.raises(NetworkBlocked):
        asyncio.run(reach())
    assert time.monotonic() - started < 1.0


def test_loopback_and_unix_sockets_still_connect(tmp_path: Path) -> None:
    """127.0.0.1, localhost and Unix socket paths connect as usual."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            with socket.create_connection((host, port), timeout=5.0) as client:
                peer, _ = server.accept()
                client.sendall(b"ping")
                assert peer.recv(4) == b"ping"
                peer.close()
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        accepted = threading.Thread(target=lambda: server.accept()[0].close())
        accepted.start()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            assert client.connect_ex(path) == 0
        accepted.join(5)


def test_loopback_rule() -> None:
    """The rule: 127.0.0.0/8, ::1 (plain or IPv4-mapped), localhost and non-IP families
    stay local; every other address or name is the network."""
    local = [
        (socket.AF_INET, ("127.0.0.1", 5432)),
        (socket.AF_INET, ("127.8.9.10", 1)),
        (socket.AF_INET, ("LOCALHOST", 1)),
        (socket.AF_INET6, ("::1", 1, 0, 0)),
        (socket.AF_INET6, ("::ffff:127.0.0.1", 1, 0, 0)),
        (socket.AF_UNIX, "/tmp/x.sock"),
        (socket.AF_UNIX, b"\x00abstract"),
    ]
    remote = [
        *REMOTE,
        (socket.AF_INET, ("0.0.0.0", 1)),
        (socket.AF_INET, ("", 1)),
        (socket.AF_INET, ("128.0.0.1", 1)),
        (socket.AF_INET, ("localhost.example.com", 1)),
    ]
    assert [is_loopback(f, a) for f, a in local] == [True] * len(local)
    assert [is_loopback(f, a) for f, a in remote] == [False] * len(remote)
