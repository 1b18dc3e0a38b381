"""Keeping secrets out of reprs, log lines and error messages.

A header or query parameter is a *credential* when the user marked its name, or when its name
looks like one: ``authorization``, ``proxy-authorization``, ``cookie``, or any name containing
``key``, ``token``, ``secret``, ``password``, ``signature`` or ``auth`` (``x-api-key``, ``api-key``,
``x-goog-api-key``, ``x-portkey-api-key``, ``access_token``, ...). Its value is shown as ``***``,
and every such value of a request is also cut out of any text about that request (an error
body in which the provider echoes the key: ``HTTP 401: Incorrect API key provided: sk-...``).

>>> redact_url("https://x.example/v1?api-version=1&key=s3cr3t-value")
'https://x.example/v1?api-version=1&key=***'
>>> r = Redactor.of_request("https://x/v1", {"Authorization": "Bearer sk-abcdef123456"})
>>> r.redact("Incorrect API key provided: sk-abcdef123456.")
'Incorrect API key provided: ***.'
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Collection, Iterable, Mapping

__all__ = [
    "REDACTED",
    "Redactor",
    "is_secret_name",
    "loopback_host",
    "redact_error",
    "redact_headers",
    "redact_json",
    "redact_url",
    "secure_destination",
]

REDACTED = "***"
_EXACT = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_PARTS = ("key", "token", "secret", "password", "passwd", "signature", "auth", "credential")
_MIN_SECRET = 6  # shorter values are not cut out of free text (they would mangle ordinary words)
_SCHEME = re.compile(r"^(bearer|basic|token|key)\s+", re.IGNORECASE)


def is_secret_name(name: str, marked: Collection[str] = ()) -> bool:
    """Whether a header or query parameter called ``name`` carries a credential."""
    lowered = name.lower()
    if lowered in _EXACT or any(lowered == m.lower() for m in marked):
        return True
    return any(part in lowered for part in _PARTS)


def redact_headers(headers: Mapping[str, str], marked: Collection[str] = ()) -> dict[str, str]:
    """A copy of ``headers`` safe to show: credential headers' values replaced by ``"***"``."""
    return {k: (REDACTED if is_secret_name(k, marked) else v) for k, v in headers.items()}


def redact_json(value: object, marked: Collection[str] = ()) -> object:
    """A copy of a JSON value safe to show: the value of every object member whose name is a
    credential's (``api_key``, ``token``...) replaced by ``"***"``, at any depth.

    >>> redact_json({"provider": {"order": ["a"]}, "extra": [{"api_key": "sk-1"}]})
    {'provider': {'order': ['a']}, 'extra': [{'api_key': '***'}]}
    """
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_name(k, marked) else redact_json(v, marked))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_json(v, marked) for v in value]
    return value


def redact_url(url: str, marked: Collection[str] = ()) -> str:
    """``url`` with credential query values and any userinfo password replaced by ``"***"``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = query.split("&")
        out = []
        for pair in pairs:
            name, sep, _ = pair.partition("=")
            out.append(f"{name}={REDACTED}" if sep and is_secret_name(urllib.parse.unquote_plus(name), marked)
                       else pair)
        query = "&".join(out)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """Cuts a request's secret values out of text (messages, log lines).

    >>> Redactor(["hunter2-hunter2"]).redact("login with hunter2-hunter2 failed")
    'login with *** failed'
    """

    __slots__ = ("_marked", "_pattern", "has_secrets")

    def __init__(self, secrets: Iterable[str] = (), *, marked: Collection[str] = ()) -> None:
        values = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None
        self._marked = tuple(marked)
        self.has_secrets: bool = any(secrets)

    @classmethod
    def of_request(cls, url: str, headers: Mapping[str, str], marked: Collection[str] = ()) -> Redactor:
        """The secrets of one request: credential header values (and the token after ``Bearer``)
        and credential query values (as sent and decoded)."""
        secrets: list[str] = []
        for name, value in headers.items():
            if value and is_secret_name(name, marked):
                secrets.append(value)
                secrets.append(_SCHEME.sub("", value))
        try:
            query = urllib.parse.urlsplit(url).query
        except ValueError:
            query = ""
        for pair in query.split("&") if query else ():
            name, sep, value = pair.partition("=")
            if sep and value and is_secret_name(urllib.parse.unquote_plus(name), marked):
                secrets += [value, urllib.parse.unquote_plus(value)]
        return cls(secrets, marked=marked)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``"***"`` (and credential query values in URLs)."""
        if self._pattern is not None:
            text = self._pattern.sub(REDACTED, text)
        return text

    def url(self, url: str) -> str:
        """``url`` safe to show."""
        return self.redact(redact_url(url, self._marked))


def redact_error(error: BaseException, redactor: Redactor) -> None:
    """Cut the secrets out of an error's message in place (``message``, ``provider_message``, ``args``)."""
    for attribute in ("message", "provider_message"):
        value = getattr(error, attribute, None)
        if isinstance(value, str):
            redacted = redactor.redact(value)
            if redacted != value:
                setattr(error, attribute, redacted)
    error.args = tuple(redactor.redact(a) if isinstance(a, str) else a for a in error.args)


def secure_destination(url: str) -> bool:
    """Whether a credential may be sent to ``url``: over TLS (``https``, ``wss``), or to a loopback host.

    The one rule for where a credential may travel in clear: a model's plain-http ``base_url`` is
    checked with it when the model is built, and the transports check the address a plain-http
    request carrying a credential actually connects to (a proxy's, from ``HTTP_PROXY`` or the
    client's own) with it too. Loopback is ``localhost`` and its subdomains, ``127.0.0.0/8``,
    ``::1`` and the IPv4-mapped spelling of either (``[::ffff:127.0.0.1]``), in any case and with or
    without a trailing dot; every other host (``127.1``, a name that resolves to loopback) is not.

    >>> [secure_destination(u) for u in ("http://[::ffff:127.0.0.1]:8080/", "http://LOCALHOST./v1",
    ...                                  "http://10.0.0.1/", "https://10.0.0.1/")]
    [True, True, False, True]
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme.lower() in ("https", "wss"):
        return True
    return loopback_host(host)


def loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 without brackets) is a loopback host, as
    :func:`secure_destination` counts them."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.partition("%")[0])  # an IPv6 zone id names no other host
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback
