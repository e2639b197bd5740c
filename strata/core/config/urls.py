"""Endpoint and object-store URLs as Strata takes them in: never with credentials.

A URL given to Strata is kept and shown: a corpus's LLM and embedding endpoints
and its mirror are written to the corpora registry and read back by every build,
and the URL is printed in error lines, logged in Dagster's event log and put in
the run metadata the UI shows. A user name and password in it
(``http://alice:PASS@host/v1``), or a key in its query string
(``?api_key=...``), would reach every one of those places. So such a URL is
refused where it is taken in (:func:`refusal`, one line saying where the secret
goes instead: an endpoint's key in the variable its ``api_key_env`` names, an
object store's credentials in the environment), and whatever is shown of a URL
that was never checked (``$OPENAI_BASE_URL``) passes :func:`shown_url` first,
and every message that may quote one :func:`shown_urls`.
"""

from __future__ import annotations

import re

from pydantic_core import PydanticCustomError

__all__ = ["KEY_HINT", "STORE_HINT", "REFUSED", "credentials_in", "refusal", "shown_url",
           "shown_urls", "url_field", "without_userinfo"]

#: where an endpoint's secret goes instead of its URL
KEY_HINT = ("put the key in the variable the endpoint's api_key_env names (default "
            "OPENAI_API_KEY) instead")
#: where an object store's secret goes instead of its URI
STORE_HINT = ("set the store's credentials in the environment (AWS_ACCESS_KEY_ID, "
              "AWS_SECRET_ACCESS_KEY, ...) instead")

#: the type of the settings error :func:`url_field` raises: its value is shown
#: through :func:`shown_url` (strata.core.config.settings)
REFUSED = "url_credentials"

# scheme://userinfo@ : everything of the authority up to its last '@'
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)?//([^/?#]*)@")
_PARAM = re.compile(r"([?&;])([^=&;#]*)=([^&;#]*)")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# the words of a query parameter's name (split at '_', '-', '.') that make it a secret
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd",
                           "sig", "signature", "credential", "credentials", "auth",
                           "authorization", "session"})


def _secret_param(name: str) -> bool:
    return bool(_SECRET_WORDS & set(re.split(r"[_.\-]", name.lower())))


def credentials_in(url: str) -> str | None:
    """What secret ``url`` carries: ``"a user name and password"``, ``"a user
    name"`` (which a server may take as a token), ``"an 'api_key' parameter"``;
    None when it carries none."""
    m = _USERINFO.match(url.strip())
    if m:
        return "a user name and password" if ":" in m.group(2) else "a user name"
    for _, name, _ in _PARAM.findall(url.partition("#")[0]):
        if _secret_param(name):
            return f"a query parameter {name!r}"
    return None


def refusal(url: str | None, hint: str = KEY_HINT) -> str | None:
    """Why ``url`` cannot be taken, as the end of a line naming the setting and
    :func:`shown_url` of the URL; None when it carries no credentials."""
    what = credentials_in(url) if url else None
    if what is None:
        return None
    return (f"carries {what}, which would be stored in the corpus registry and shown in "
            f"errors and logs; give the URL without it and {hint}")


def shown_url(url: str | None) -> str:
    """``url`` as it may be printed, logged or stored in run metadata: no user
    information (``http://***@host/v1``), and the value of a query parameter
    whose name says it is a secret as ``***``."""
    if not url:
        return url or ""
    text = _USERINFO.sub(lambda m: f"{m.group(1) or ''}//***@", url.strip(), count=1)
    return _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}=***" if _secret_param(m.group(2))
                      else m.group(0), text)


def without_userinfo(url: str) -> str:
    """``url`` without its user information: what a request that needs no
    credentials (a probe asking whether anything answers) is sent to. urllib
    takes ``user:pass@host`` for the host name and reports it as one that does
    not resolve."""
    return _USERINFO.sub(lambda m: f"{m.group(1) or ''}//", url, count=1)


def shown_urls(text: str) -> str:
    """``text`` (an error message, a log line) with every URL in it as
    :func:`shown_url` shows it: a library's message may quote the URL it was given."""
    return _URL_IN_TEXT.sub(lambda m: shown_url(m.group(0)), text) if text else text


def url_field(value):
    """A settings field's check (a pydantic ``AfterValidator``): an endpoint URL
    carrying credentials is refused (:func:`refusal`)."""
    why = refusal(value)
    if why:
        raise PydanticCustomError(REFUSED, "{why}", {"why": why})
    return value
