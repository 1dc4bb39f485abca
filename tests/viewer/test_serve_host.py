"""`view --serve` answers only its own address: a foreign Host header (DNS rebinding) gets a 421."""

from __future__ import annotations

import socket

import httpx
import pytest

from orchestrace.viewer.serve import serve_in_thread


@pytest.fixture()
def served():
    server, url = serve_in_thread("<!DOCTYPE html><p>page</p>")
    try:
        yield url, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str, host: str) -> httpx.Response:
    return httpx.get(url, headers={"Host": host}, timeout=10)


def test_own_address_and_localhost_are_answered(served) -> None:
    url, port = served
    for host in (f"127.0.0.1:{port}", "127.0.0.1", "localhost", f"localhost:{port}", f"LOCALHOST:{port}"):
        r = _get(url, host)
        assert r.status_code == 200 and "<p>page</p>" in r.text, host


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1.evil.example",
        "127.0.0.1:1",
        "localhost.evil.example",
        "0.0.0.0",
    ],
)
def test_foreign_host_is_refused(served, host: str) -> None:
    url, port = served
    r = _get(url, host.format(port=port))
    assert r.status_code == 421 and "<p>page</p>" not in r.text


def test_request_without_host_is_refused(served) -> None:
    _, port = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 421") and b"<p>page</p>" not in reply
