"""The URL guard: which URLs the page fetcher may request.

Search results are untrusted input: a result (or a redirect from one) may point at `file:` URLs, at the
machine itself, at the local network or at a cloud metadata service.  The guard accepts only `http` and
`https` URLs whose host resolves (`socket.getaddrinfo`, every address checked) to public addresses, unless
the configuration explicitly allows private ones (`allow_private: true`) or names hosts, addresses or
networks in `allowed_hosts` (tests use `["127.0.0.1"]`).

DNS rebinding is closed: `check` returns the address it checked, and the fetcher connects to that address
(`retrievers.web.fetch.pinned_session`), never resolving the name again; the Host header and TLS (SNI and
certificate check) still use the name.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from eor.core.errors import RetrieverError

ALLOWED_SCHEMES = ("http", "https")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class UrlRefusedError(RetrieverError):
    """The URL guard refused a URL (scheme, or an address the configuration does not allow)."""


def address_kind(address: IPAddress) -> str | None:
    """Why `address` is not public ("private", "loopback", ...), or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    )
    for kind, flagged in checks:
        if flagged:
            return kind
    return None if address.is_global else "non-public"


@dataclass(frozen=True)
class UrlGuard:
    """Checks URLs before each request (the first one and every redirect hop)."""

    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names, networks = set(), []
        for entry in self.allowed_hosts:
            text = str(entry).strip().lower().strip("[]")
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                names.add(text.rstrip("."))
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(self, "_networks", tuple(networks))

    @classmethod
    def from_config(cls, allow_private: bool = False, allowed_hosts: Iterable[str] = ()) -> UrlGuard:
        return cls(allow_private=allow_private, allowed_hosts=tuple(sorted(set(allowed_hosts))))

    def policy(self) -> dict[str, object]:
        """What the guard allows, as plain data (part of the page cache's key)."""
        return {"allow_private": self.allow_private, "allowed_hosts": sorted(self.allowed_hosts)}

    def check_scheme(self, url: str, *, via: str | None = None) -> str:
        """Refuse non-http(s) URLs and URLs without a host; return the host name."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if not scheme:
            raise UrlRefusedError(f"{_refusing(url, via)}: the URL has no scheme (only http and https are allowed)")
        if scheme not in ALLOWED_SCHEMES:
            raise UrlRefusedError(f"{_refusing(url, via)}: scheme {scheme}: is not allowed (only http and https)")
        try:
            host = parts.hostname
            parts.port  # noqa: B018 - validates the port
        except ValueError as exc:
            raise UrlRefusedError(f"{_refusing(url, via)}: malformed URL ({exc})") from None
        if not host:
            raise UrlRefusedError(f"{_refusing(url, via)}: the URL has no host")
        return host

    def check(self, url: str, *, via: str | None = None) -> IPAddress | None:
        """Raise UrlRefusedError unless `url` may be fetched; `via` names the URL that redirected here.

        Returns the address the connection must use (the first one checked), or None where no address needs
        pinning: private addresses are allowed anyway, or the host is allowed by name."""
        host = self.check_scheme(url, via=via)
        if self.allow_private or host.rstrip(".") in self._names:
            return None
        addresses = self._resolve(url, host, via)
        for address in addresses:
            kind = address_kind(address)
            if kind is not None and not any(address in network for network in self._networks):
                raise UrlRefusedError(
                    f"{_refusing(url, via)}: {kind} address {address} (set allow_private: true, or add "
                    f"{str(address)!r} to allowed_hosts, to allow it)"
                )
        return addresses[0]

    def _resolve(self, url: str, host: str, via: str | None) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        port = urlsplit(url).port or (443 if url.lower().startswith("https:") else 80)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise RetrieverError(f"cannot fetch {url}: cannot resolve host {host!r} ({exc})") from None
        addresses = []
        for info in infos:
            text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone index
            addresses.append(ipaddress.ip_address(text))
        if not addresses:
            raise RetrieverError(f"cannot fetch {url}: host {host!r} has no address")
        return addresses


def _refusing(url: str, via: str | None) -> str:
    return f"refusing to fetch {url}" + (f" (redirected from {via})" if via else "")
