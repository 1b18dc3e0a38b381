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

Beyond one request, every key a model was built with is *known* (:func:`register_secret`, called
by the providers when they check a key): :func:`redact_secrets` is the one function every other
way out goes through -- in-band error texts on finals and events before they are stored, span
names, status descriptions, attributes and events, log records of ``rxllm`` and the HTTP
libraries (:func:`redact_log_records`), ``rxllm chat``'s output -- and :meth:`Redactor.redact`
cuts the known keys too. Keys are matched as they are sent: without surrounding whitespace.

>>> register_secret("  sk-known-0123456789\\n")
>>> redact_secrets("upstream said: bad key sk-known-0123456789")
'upstream said: bad key ***'
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import re
import threading
import urllib.parse
from collections.abc import Collection, Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "Redactor",
    "is_secret_name",
    "loopback_host",
    "redact_error",
    "redact_headers",
    "redact_json",
    "redact_log_records",
    "redact_secrets",
    "redact_url",
    "redact_value",
    "register_secret",
    "register_secrets_of",
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


_MIN_KNOWN = 8  # a process-wide secret is cut out of every text: a short one would be an ordinary word
_known_lock = threading.Lock()
_known: set[str] = set()
_known_pattern: re.Pattern[str] | None = None


def _pattern_of(values: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted({v for v in values if v and len(v) >= _MIN_SECRET}, key=len, reverse=True)
    return re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None


def register_secret(value: str | None) -> None:
    """Make ``value`` (a key, a token) known: :func:`redact_secrets` cuts it out of any text from now on.

    Normalised as it is sent (surrounding whitespace and line ends stripped); values shorter than
    8 characters are not registered (cut out of every text, they would mangle ordinary words).
    Registering also puts :func:`redact_log_records` in place.
    """
    global _known_pattern
    if not isinstance(value, str):
        return
    value = value.strip()
    if len(value) < _MIN_KNOWN:
        return
    with _known_lock:
        if value in _known:
            return
        _known.add(value)
        _known_pattern = _pattern_of(_known)
    redact_log_records()


def register_secrets_of(headers: Mapping[str, str] | None = None, body: object = None,
                        marked: Collection[str] = ()) -> None:
    """:func:`register_secret` every credential in ``headers`` (the value of a header whose name is
    a credential's, and its token after ``Bearer``) and in the JSON value ``body`` (every string
    under an object member whose name is a credential's, at any depth): a key sent in an extra
    header or an extra body member is then cut out of errors, logs and stored texts like the API key.

    >>> register_secrets_of({"X-Gateway-Token": "Bearer gw-0123456789"}, {"auth": {"api_key": "gw-body-0123456789"}})
    >>> redact_secrets("echo: gw-0123456789 / gw-body-0123456789")
    'echo: *** / ***'
    """
    for name, value in (headers or {}).items():
        if isinstance(name, str) and isinstance(value, str) and value and is_secret_name(name, marked):
            register_secret(value)
            register_secret(_SCHEME.sub("", value.strip()))
    pending: list[tuple[object, bool]] = [(body, False)]
    while pending:
        item, secret = pending.pop()
        if isinstance(item, str):
            if secret:
                register_secret(item)
        elif isinstance(item, Mapping):
            pending.extend((v, secret or (isinstance(k, str) and is_secret_name(k, marked))) for k, v in item.items())
        elif isinstance(item, list | tuple):
            pending.extend((v, secret) for v in item)


def redact_secrets(text: str) -> str:
    """``text`` with every known secret (see :func:`register_secret`) replaced by ``"***"``."""
    pattern = _known_pattern
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def redact_value(value: Any) -> Any:
    """A span attribute's value (a string, or a list or tuple of them) with the known secrets cut out."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value) if type(value) in (list, tuple) else value
    return value


class _SecretFilter(logging.Filter):
    """Cuts known secrets out of a log record: its message, arguments and formatted exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _known_pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error reporting
            return True
        redacted = redact_secrets(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact_secrets(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        return True


_FILTER = _SecretFilter()
_FILTERED_ROOTS = frozenset({"rxllm", "httpx", "httpcore", "h11", "h2", "urllib3", "websockets", "mcp"})
_factory_installed = False


def redact_log_records() -> None:
    """Cut known secrets out of every log record of rxllm and of the HTTP libraries it drives.

    Installed once, as a wrapper around the current log record factory (the standard library's
    extension point: a logger's own filter would not apply to its children, nor to loggers made
    later): records of other loggers pass unchanged. Called by each :func:`register_secret`.
    """
    global _factory_installed
    with _known_lock:
        if _factory_installed:
            return
        _factory_installed = True
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _known_pattern is not None and record.name.split(".", 1)[0] in _FILTERED_ROOTS:
                _FILTER.filter(record)
            return record

        logging.setLogRecordFactory(factory)


class Redactor:
    """Cuts a request's secret values out of text (messages, log lines).

    >>> Redactor(["hunter2-hunter2"]).redact("login with hunter2-hunter2 failed")
    'login with *** failed'
    """

    __slots__ = ("_marked", "_pattern", "has_secrets")

    def __init__(self, secrets: Iterable[str] = (), *, marked: Collection[str] = ()) -> None:
        secrets = list(secrets)
        self._pattern = _pattern_of([*secrets, *(s.strip() for s in secrets if s)])
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
        """``text`` with every secret value replaced by ``"***"`` (the request's and the known ones)."""
        if self._pattern is not None:
            text = self._pattern.sub(REDACTED, text)
        return redact_secrets(text)

    def url(self, url: str) -> str:
        """``url`` safe to show."""
        return self.redact(redact_url(url, self._marked))


def redact_error(error: BaseException, redactor: Redactor | None = None) -> None:
    """Cut the secrets out of an error's message in place (``message``, ``provider_message``,
    ``args``), and out of every error it chains (``__cause__``, ``__context__``).

    ``redactor`` adds one request's secrets to the known ones (:func:`register_secret`).
    """
    redact = redactor.redact if redactor is not None else redact_secrets
    seen: set[int] = set()
    current: BaseException | None = error
    pending: list[BaseException] = []
    while current is not None or pending:
        if current is None:
            current = pending.pop()
        if id(current) in seen:
            current = None
            continue
        seen.add(id(current))
        for attribute in ("message", "provider_message"):
            value = getattr(current, attribute, None)
            if isinstance(value, str):
                redacted = redact(value)
                if redacted != value:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(current, attribute, redacted)
        with contextlib.suppress(AttributeError, TypeError):
            current.args = tuple(redact(a) if isinstance(a, str) else a for a in current.args)
        if current.__context__ is not None and current.__context__ is not current.__cause__:
            pending.append(current.__context__)
        current = current.__cause__


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
