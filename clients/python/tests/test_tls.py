"""TLS and mutual TLS against bin/mcpd, with certificates made here (no
key is checked in): a token over TLS, client certificates naming callers
with different permissions, and the asyncio client."""

from __future__ import annotations

import datetime
import ipaddress
import json
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from test_remote import TCPDaemon

import mcpd_grpc
from conftest import RPC_TIMEOUT, Daemon, free_port, poll, run_async
from mcpd_grpc import AsyncClient, Client, ServerConfig, TLSConfig


class CA:
    """A certificate authority for one test."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            # Key identifiers: Python 3.13's ssl verifies strictly (X.509 v3).
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"{name}-ca.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, server: bool = False, uri: Optional[str] = None) -> Tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        sans: List[x509.GeneralName] = []
        if server:
            sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        if uri:
            sans.append(x509.UniformResourceIdentifier(uri))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.folder / f"{name}.pem", self.folder / f"{name}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return cert_path, key_path


def mutual_tls_args(cert: Path, key: Path, client_ca: CA, callers: Path) -> List[str]:
    """mcpd's flags for TLS with client certificates of client_ca, which
    name the callers of the callers file."""
    return ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(client_ca.path), "--callers", str(callers)]


def test_tls_with_token(mcpd_bin: str, tmp_path: Path) -> None:
    ca = CA(tmp_path, "server")
    cert, key = ca.issue("mcpd", server=True)
    token_file = tmp_path / "token"
    token_file.write_text("py-tls-token-6a2e\n")
    d = TCPDaemon(mcpd_bin, tmp_path, "tls", args=["--tls-cert", str(cert), "--tls-key", str(key), "--api-token-file", str(token_file)]).start()
    try:
        with Client(d.target, ca_file=ca.path, token="py-tls-token-6a2e", timeout=RPC_TIMEOUT) as c:
            poll("the demo server over TLS", lambda: c.get_server("demo").ready)
            assert c.call_tool("mcp__demo__echo", {"message": "over tls"}).text == "over tls"
        with Client(d.target, ca_file=ca.path, token="", timeout=RPC_TIMEOUT) as c:
            with pytest.raises(mcpd_grpc.Unauthenticated):
                c.servers()
    finally:
        d.stop()


def test_mutual_tls_callers(mcpd_bin: str, tmp_path: Path) -> None:
    server_ca, client_ca = CA(tmp_path, "server"), CA(tmp_path, "clients")
    cert, key = server_ca.issue("mcpd", server=True)
    callers = tmp_path / "callers.json"
    callers.write_text(
        json.dumps(
            {
                "callers": [
                    {"name": "echoer", "spiffe_id": "spiffe://py.test/echoer", "permissions": {"servers": ["demo"], "tools": ["mcp__demo__echo"]}},
                    {"name": "adder", "spiffe_id": "spiffe://py.test/adder", "permissions": {"servers": ["demo"], "tools": ["mcp__demo__add"]}},
                ]
            }
        )
    )
    echoer = client_ca.issue("echoer", uri="spiffe://py.test/echoer")
    adder = client_ca.issue("adder", uri="spiffe://py.test/adder")
    d = TCPDaemon(mcpd_bin, tmp_path, "mtls", args=mutual_tls_args(cert, key, client_ca, callers)).start()
    try:
        with Client(d.target, ca_file=server_ca.path, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
            poll("the demo server over mTLS", lambda: c.get_server("demo").ready)
            assert [tool.name for tool in c.list_tools()] == ["mcp__demo__echo"]
            assert c.call_tool("mcp__demo__echo", {"message": "mtls"}).text == "mtls"
            with pytest.raises(mcpd_grpc.PermissionDenied):
                c.call_tool("mcp__demo__add", {"a": 1, "b": 2})

        async def as_adder() -> List[str]:
            async with AsyncClient(d.target, ca_file=server_ca.path, cert_file=adder[0], key_file=adder[1], timeout=RPC_TIMEOUT) as c:
                return [tool.name for tool in await c.list_tools()]

        assert run_async(as_adder()) == ["mcp__demo__add"]
    finally:
        d.stop()


def test_tls_arguments_checked() -> None:
    with pytest.raises(ValueError, match="go together"):
        Client("127.0.0.1:1", cert_file="client.pem")
    with pytest.raises(ValueError, match="not both"):
        Client("127.0.0.1:1", ca_file="ca.pem", credentials=object())  # type: ignore[arg-type]


def test_mutual_tls_over_https(mcpd_bin: str, tmp_path: Path) -> None:
    # The HTTP wire builds its TLS from the same files; mcpd's HTTP listener
    # serves HTTPS with the gRPC listener's certificate and asks for client
    # certificates too.
    server_ca, client_ca = CA(tmp_path, "server"), CA(tmp_path, "clients")
    cert, key = server_ca.issue("mcpd", server=True)
    callers = tmp_path / "callers.json"
    callers.write_text(
        json.dumps(
            {"callers": [{"name": "echoer", "spiffe_id": "spiffe://py.test/echoer", "permissions": {"servers": ["demo"], "tools": ["mcp__demo__echo"]}}]}
        )
    )
    echoer = client_ca.issue("echoer", uri="spiffe://py.test/echoer")
    http_port = free_port()
    d = TCPDaemon(mcpd_bin, tmp_path, "https", args=[*mutual_tls_args(cert, key, client_ca, callers), "--http-listen", f"127.0.0.1:{http_port}"]).start()
    try:
        with Client(d.target, ca_file=server_ca.path, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
            poll("the demo server over mTLS", lambda: c.get_server("demo").ready)
        target = f"https://127.0.0.1:{http_port}"
        with Client(target, ca_file=server_ca.path, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
            assert [tool.name for tool in c.list_tools()] == ["mcp__demo__echo"]
            assert c.call_tool("mcp__demo__echo", {"message": "https"}).text == "https"
            with pytest.raises(mcpd_grpc.PermissionDenied):
                c.call_tool("mcp__demo__add", {"a": 1, "b": 2})
            items = list(c.call_tool_stream("mcp__demo__echo", {"message": "streamed"}))
            assert items[-1].text == "streamed", items
        # Without the CA the server's certificate is not trusted. No TLS
        # handshake: a tool call reached nothing, and is retryable.
        for untrusted in (target, d.target):
            with Client(untrusted, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
                with pytest.raises(mcpd_grpc.Unavailable):
                    c.servers()
                for call in (lambda: c.call_tool("mcp__demo__echo", {"message": "x"}), lambda: list(c.call_tool_stream("mcp__demo__echo", {"message": "x"}))):
                    with pytest.raises(mcpd_grpc.Unavailable) as info:
                        call()
                    assert info.value.reason == "" and info.value.retryable, f"{untrusted}: got {info.value!r}"

        async def over_https() -> None:
            async with AsyncClient(target, ca_file=server_ca.path, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
                assert (await c.call_tool("mcp__demo__echo", {"message": "async https"})).text == "async https"
                with pytest.raises(mcpd_grpc.PermissionDenied):
                    await c.call_tool("mcp__demo__add", {"a": 1, "b": 2})
                items = [i async for i in c.call_tool_stream("mcp__demo__echo", {"message": "streamed"})]
                assert items[-1].text == "streamed", items
            for untrusted in (target, d.target):
                async with AsyncClient(untrusted, cert_file=echoer[0], key_file=echoer[1], timeout=RPC_TIMEOUT) as c:
                    with pytest.raises(mcpd_grpc.Unavailable):
                        await c.servers()
                    with pytest.raises(mcpd_grpc.Unavailable) as info:
                        await c.call_tool("mcp__demo__echo", {"message": "x"})
                    assert info.value.reason == "" and info.value.retryable, f"{untrusted}: got {info.value!r}"
                    with pytest.raises(mcpd_grpc.Unavailable) as info:
                        async for _ in c.call_tool_stream("mcp__demo__echo", {"message": "x"}):
                            pass
                    assert info.value.reason == "" and info.value.retryable, f"{untrusted}: got {info.value!r}"

        run_async(over_https())
    finally:
        d.stop()


def test_connect_server_with_tls_files(mcpd_bin: str, tmp_path: Path) -> None:
    """connect_server(..., tls=TLSConfig(...)) reaches an MCP server behind
    mutual TLS with a private CA: another mcpd's MCP endpoint, whose caller
    is named by the client certificate the first mcpd presents."""
    server_ca, client_ca = CA(tmp_path, "server"), CA(tmp_path, "clients")
    cert, key = server_ca.issue("upstream", server=True)
    callers = tmp_path / "callers.json"
    callers.write_text(
        json.dumps({"callers": [{"name": "hub", "spiffe_id": "spiffe://py.test/hub", "permissions": {"servers": ["demo"], "tools": ["mcp__demo__echo"]}}]})
    )
    hub_cert, hub_key = client_ca.issue("hub", uri="spiffe://py.test/hub")
    mcp_port = free_port()
    upstream = TCPDaemon(
        mcpd_bin, tmp_path, "upstream", args=[*mutual_tls_args(cert, key, client_ca, callers), "--mcp-listen", f"127.0.0.1:{mcp_port}"]
    ).start()
    try:
        with Client(upstream.target, ca_file=server_ca.path, cert_file=hub_cert, key_file=hub_key, timeout=RPC_TIMEOUT) as c:
            poll("the upstream's demo server", lambda: c.get_server("demo").ready)
        d = Daemon(mcpd_bin, tmp_path, "hub").start()
        try:
            url = f"https://127.0.0.1:{mcp_port}/mcp"
            tls = TLSConfig(ca_file=str(server_ca.path), cert_file=str(hub_cert), key_file=str(hub_key))
            with d.client() as c:
                s = c.connect_server(ServerConfig.http("up", url, tls=tls))
                assert s.ready, s.last_error
                assert c.call_tool("mcp__up__mcp__demo__echo", {"message": "through mTLS"}).text == "through mTLS"
                # Without the files the upstream's certificate is not trusted;
                # without the client certificate the upstream refuses mcpd.
                s = c.connect_server(ServerConfig.http("plain", url))
                assert not s.ready and "certificate" in s.last_error, s.last_error
                s = c.connect_server(ServerConfig.http("anonymous", url, tls=TLSConfig(ca_file=str(server_ca.path))))
                assert not s.ready and s.last_error, s
        finally:
            d.stop()
    finally:
        upstream.stop()
