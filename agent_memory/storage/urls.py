"""Naming a store: URLs and their schemes, database URLs, and how they are shown.

A URL can carry a secret: the password of its user info (``postgresql://alice:pw@host/db``) or a
``password=`` parameter (``?password=pw``, or a libpq ``key=value`` string). Every message, log
line and note that can carry a URL, or a dependency's message about one, is made by the functions
here, the one place a URL becomes text (SQLAlchemy's ``URL.render_as_string(hide_password=True)``
is the model): :func:`redacted_url` (one URL), :func:`redacted_text` (any text, with the secrets
of the URLs it may quote) and :func:`redact_error` (an exception and every exception chained to
it). They mask what a URL that does not parse holds too: a parser's error (libpq's) quotes the
URL whole, or the password alone.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from agent_memory.errors import ConfigurationError, quoted

__all__ = [
    "MASK",
    "checked_url",
    "is_database_url",
    "lowercase_scheme",
    "redact_error",
    "redacted_text",
    "redacted_url",
    "url_scheme",
]

MASK = "***"
"""What a secret is shown as."""

_POSTGRES_SCHEMES = ("postgresql", "postgres")

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
"""``<scheme>://`` at the start of a URL: a scheme as RFC 3986 section 3.1 spells one
(https://www.rfc-editor.org/rfc/rfc3986#section-3.1): a letter, then letters, digits, ``+ - .``."""

_URL_LIKE = re.compile(r"([^/\\]*)://")
"""What is meant as a URL: text without ``/`` or ``\\`` before its first ``://`` (a path such as
``./a://b`` has a ``/`` before it)."""

_URL_IN_TEXT = re.compile(r"[\w+.-]*://[^\s\"'<>]*")
"""A URL quoted in a message: a scheme (or a misspelt one: ``1abc``, ``my_db``, none), ``://``,
up to a blank or a quote."""

_SECRET_KEY = r"[\w.-]*(?:password|passwd|pwd|secret|api_?key|token)"
"""Names of parameters that hold a secret: ``password`` and libpq's ``sslpassword``
(https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS), ``client_secret``,
``api_key``, ``access_token``, ..."""

_SECRET_PARAMETER = re.compile(
    rf"(?i)\b({_SECRET_KEY})(\s*=\s*)('(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&'\"]*)")
"""``key=value`` of a secret, in a query string (``?password=pw&...``) or a libpq keyword/value
string (``password='a b'``): the value quoted, or up to a blank, ``&`` or a quote."""

_MIN_PIECE_CHARS = 3
"""A piece of a password (between two ``@`` or ``/``) is masked in text where it stands alone
only when it has at least this many characters: shorter ones reveal little and would mask common
words of the message."""

_WORD_CHAR = "A-Za-z0-9"


def url_scheme(value: str) -> str | None:
    """The scheme of ``value`` when it is a ``<scheme>://...`` URL, lowercased (schemes are
    case-insensitive): ``"postgresql"`` for ``" PostgreSQL://h/db"`` (surrounding blanks are
    ignored), ``"file"`` for ``file:///srv/memory``. ``None``: ``value`` is not such a URL, but a
    path (``./memory``, ``/srv/memory``, ``memory``; a path whose first component ends in ``:``,
    such as ``a:/b``, has no ``//`` after the colon and is a path too) or a URL whose scheme is
    misspelt (``://x``, ``1abc://x``: :func:`checked_url` refuses them)."""
    match = _SCHEME.match(value.strip())
    return match.group(1).lower() if match else None


def checked_url(value: str) -> str | None:
    """The scheme of ``value`` (:func:`url_scheme`), after checking that a ``value`` meant as a
    URL is one. ``None``: ``value`` is a path.

    ``value`` is meant as a URL when it holds ``://`` with no ``/`` or ``\\`` before it (after
    blanks are stripped); a memory directory whose name holds ``://`` is named by a ``file://``
    URL or a path with a ``/`` before it (``./a://b``).

    Raises:
        ConfigurationError: the text before ``://`` is not a scheme (RFC 3986 section 3.1: a
            letter, then letters, digits, ``+ - .``; ``://x``, ``1abc://x``, ``my_db://x``), or
            the user name or password holds an ``@`` not percent-encoded as ``%40`` (RFC 3986
            section 3.2.1), which parsers split at different ``@`` s. The message shows ``value``
            without its password (:func:`redacted_url`).
    """
    text = value.strip()
    scheme = url_scheme(text)
    if scheme is None:
        match = _URL_LIKE.match(text)
        if match is None:
            return None
        prefix = match.group(1)
        problem = f"{quoted(prefix)} is not a URL scheme" if prefix else "it has no scheme before '://'"
        raise ConfigurationError(
            f"{quoted(redacted_url(text))} is not a URL: {problem} (a scheme is a letter, then letters, digits, '+', "
            "'-', '.'); a memory directory whose name holds '://' is named with file:// before it")
    authority = re.split(r"[/?#]", text[len(scheme) + 3:], maxsplit=1)[0]
    if authority.count("@") > 1:
        raise ConfigurationError(
            f"the user name or password of {quoted(redacted_url(text))} holds an '@': percent-encode it as '%40' "
            "(only the '@' before the host stays as it is)")
    return scheme


def is_database_url(value: str) -> bool:
    """Whether ``value`` names a Postgres database (``postgresql://``, ``postgres://``, in any case)."""
    return url_scheme(value) in _POSTGRES_SCHEMES


def lowercase_scheme(url: str) -> str:
    """``url`` with its scheme in lower case and blanks around it removed (``PostgreSQL://h/db``
    → ``postgresql://h/db``): schemes are case-insensitive and lower case is their canonical form
    (RFC 3986 section 3.1), the only one libpq accepts. A value without a scheme (a libpq
    ``key=value`` string, a path) is returned stripped."""
    text = url.strip()
    scheme = url_scheme(text)
    return text if scheme is None else scheme + text[len(scheme):]


def redacted_url(url: str) -> str:
    """``url`` without its secrets, for messages, logs and notes: the password of its user info
    (``postgresql://alice:***@host/db``) and the value of every parameter that names a secret
    (``?password=***``, ``sslpassword=***``; libpq's ``key=value`` strings too).

    It never fails and never needs ``url`` to parse: the user info runs to the last ``@`` before
    the query (``?``) or fragment (``#``), so an unencoded ``@`` or ``/`` in a password, a bad
    ``%`` escape or an unclosed ``[`` hide nothing; an ``@`` in the path of a URL that has no
    user info may hide more than a password (never less).
    """
    match = _URL_LIKE.match(url.lstrip())  # a misspelt scheme too: its message shows the URL
    if match is None:
        return _SECRET_PARAMETER.sub(_masked_parameter, url)
    start = len(url) - len(url.lstrip()) + match.end()
    head, rest = url[:start], url[start:]
    userinfo, at, after = _split_userinfo(rest)
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{MASK}{at}{after}" if colon else rest
    return head + _SECRET_PARAMETER.sub(_masked_parameter, rest)


def redacted_text(text: str, *urls: str) -> str:
    """``text`` (a message, a log line, a dependency's error) as it may be shown: every URL in it
    and every ``password=`` parameter without its secret (:func:`redacted_url`), and every secret
    of ``urls`` (their passwords and secret parameters, as written and percent-decoded, and the
    pieces of a password between ``@`` or ``/`` that a parser splitting it elsewhere quotes)
    masked wherever it stands alone (not inside a longer word): a parser's message may quote a
    password alone (libpq: ``invalid percent-encoded token: "pw%ZZ"``)."""
    for url in urls:
        for form in {url, url.strip()}:
            if form:
                text = text.replace(form, redacted_url(form))
    text = _URL_IN_TEXT.sub(lambda match: redacted_url(match.group(0)), text)
    text = _SECRET_PARAMETER.sub(_masked_parameter, text)
    secrets = sorted({secret for url in urls for secret in _secrets(url)}, key=len, reverse=True)
    for secret in secrets:
        text = re.sub(rf"(?<![{_WORD_CHAR}]){re.escape(secret)}(?![{_WORD_CHAR}])", MASK, text)
    return text


def redact_error(exc: BaseException, *urls: str) -> BaseException:
    """Mask, in place, the secrets of ``urls`` and any URL's password (:func:`redacted_text`) in
    ``exc`` and in every exception chained to it (``__cause__``, ``__context__``, the members of
    an exception group): their string arguments and their notes (PEP 678). A traceback of
    ``exc`` then shows no secret. Returns ``exc``, for ``raise redact_error(exc, url)``."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.args = tuple(redacted_text(arg, *urls) if isinstance(arg, str) else arg for arg in current.args)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [redacted_text(note, *urls) if isinstance(note, str) else note for note in notes]
        if isinstance(current, OSError):  # its str() is made of these, not of args
            for name in ("strerror", "filename", "filename2"):
                value = getattr(current, name, None)
                if isinstance(value, str):
                    setattr(current, name, redacted_text(value, *urls))
        pending.extend(chained for chained in (current.__cause__, current.__context__) if chained is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return exc


def _split_userinfo(rest: str) -> tuple[str, str, str]:
    """``rest`` (a URL after ``scheme://``) split at the last ``@`` before its query or fragment:
    ``(user info, "@", host and the rest)``, or ``("", "", rest)`` when there is no ``@``."""
    end = len(re.split(r"[?#]", rest, maxsplit=1)[0])
    at = rest.rfind("@", 0, end)
    if at < 0:
        return "", "", rest
    return rest[:at], "@", rest[at + 1:]


def _masked_parameter(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}{MASK}" if match.group(3) else match.group(0)


def _secrets(url: str) -> set[str]:
    """The secrets ``url`` holds, each as written and percent-decoded: its user info's password
    (and the password's pieces between ``@`` or ``/`` of :data:`_MIN_PIECE_CHARS` or more), the
    values of its secret parameters (:data:`_SECRET_PARAMETER`)."""
    found: set[str] = set()
    match = _URL_LIKE.match(url.strip())
    if match is not None:
        userinfo, at, _ = _split_userinfo(url.strip()[match.end():])
        user, colon, password = userinfo.partition(":")
        if at and colon and password:
            found.add(password)
            found.update(piece for piece in re.split(r"[@/]", password) if len(piece) >= _MIN_PIECE_CHARS)
    for parameter in _SECRET_PARAMETER.finditer(url):
        value = parameter.group(3)
        if value[:1] in ("'", '"'):
            found.add(value)
            value = value.strip("'\"")
        found.add(value)
    return {form for secret in found if secret for form in (secret, unquote(secret)) if form}
