"""Where webhooks may go: public addresses only, unless the operator allowlisted a receiver.

A tenant's webhook must never reach the scheduler's own network (metadata services,
databases, loopback ports): the effect's state would turn it into a port scanner. The URL
is judged twice. When a schedule is saved, `url_refusal` judges the literal host without
any look-up. Just before delivery, `resolve_destination` resolves the host and judges every
address it got; the connection then goes to one of those addresses, never through a second
look-up that could answer differently (DNS rebinding).

`WEBHOOK_ALLOWED_NETWORKS` (CIDRs or host names) opens specific internal receivers.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressDenied(Exception):
    """The destination is not a public host and no allowlist entry opens it."""


@dataclass(frozen=True)
class Destination:
    """A webhook URL with the checked addresses to connect to (the Host header and TLS
    server name stay `host`)."""

    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line
    addresses: tuple[str, ...]


def url_refusal(url: str) -> str | None:
    """Why `url` may never be a webhook target, judged without any look-up; None if it may be."""
    try:
        parts = urlsplit(url)
        port = parts.port
        host = _host(parts.hostname)
    except ValueError:  # a port out of 0..65535, a malformed bracketed address, a host IDNA refuses
        return "the URL's port or host is malformed"
    if not host:
        return "the URL has no host"
    if port == 0:
        return "port 0 is not a destination"
    if host in _allowed_names():
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return f"{host} is not a public host"
    address = _literal_address(host)
    if address is not None and not _address_allowed(address):
        return f"{address} is not a public address"
    return None


def resolve_destination(url: str) -> Destination:
    """The URL's destination with every address its host resolves to, each checked.

    EgressDenied if the URL or any resolved address is refused; OSError if the host does
    not resolve (nothing was sent, so the delivery may be tried again)."""
    refusal = url_refusal(url)
    if refusal:
        raise EgressDenied(refusal)
    parts = urlsplit(url)
    host = _host(parts.hostname)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = tuple(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise OSError(f"{host} resolved to no address")
    if host not in _allowed_names():
        for text in addresses:
            if not _address_allowed(ipaddress.ip_address(text)):
                raise EgressDenied(f"{host} resolves to {text}, which is not a public address")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme, host, port, target, addresses)


def _host(hostname: str | None) -> str:
    """The host as the resolver is asked for it: a name outside ASCII goes through IDNA, as
    socket.getaddrinfo sends it, so `１２７.0.0.1` (fullwidth digits) or `127。0.0.1` is
    judged as the 127.0.0.1 it resolves to. ValueError (UnicodeError) if IDNA refuses it."""
    host = (hostname or "").rstrip(".").lower()
    if not host.isascii():
        host = host.encode("idna").decode("ascii").rstrip(".")
    return host


def _literal_address(host: str) -> Address | None:
    """The address a host literally names, including the shorthand forms resolvers accept
    (`127.1`, `0x7f000001`, `2130706433`)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _address_allowed(address: Address) -> bool:
    return any(address in network for network in _allowed_networks()) or _is_public(address)


def _is_public(address: Address) -> bool:
    """Globally routable unicast. IPv6 forms that carry an IPv4 address (mapped, 6to4,
    Teredo) are judged by that address too."""
    if address.version == 6:
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None and not _is_public(embedded):
            return False
    return address.is_global and not (address.is_multicast or address.is_reserved)


def _allowed_networks() -> tuple:
    return _parse_allowlist(tuple(settings.WEBHOOK_ALLOWED_NETWORKS))[0]


def _allowed_names() -> frozenset[str]:
    return _parse_allowlist(tuple(settings.WEBHOOK_ALLOWED_NETWORKS))[1]


@functools.lru_cache(maxsize=8)
def _parse_allowlist(entries: tuple[str, ...]) -> tuple[tuple, frozenset[str]]:
    """(networks, host names) of the allowlist: an entry that parses as a network or an
    address is one, anything else is a host name."""
    networks, names = [], set()
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            try:
                names.add(_host(entry))
            except ValueError:  # not a name IDNA takes: it can never match a host
                continue
    return tuple(networks), frozenset(names)
