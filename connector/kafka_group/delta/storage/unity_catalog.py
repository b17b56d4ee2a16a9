"""Unity Catalog: a table's location and temporary credentials, through its REST API.

Two calls of the open Unity Catalog API (the same on Databricks, under ``/api/2.1/unity-catalog``):
``GET /tables/{full_name}`` (the table's id, ``storage_location`` and format) and
``POST /temporary-table-credentials`` (credentials for that location, for ``READ_WRITE``).
The credentials become delta-rs storage options (:func:`storage_options_of`). They are
secrets: no log line, error or ``repr`` holds them, nor the catalog token (both are registered
with :mod:`kafka_group.redaction`; an address with a user name or password is refused). Plain
``urllib`` keeps the dependency list short (PyPI's ``unitycatalog-client`` is an
asynchronous aiohttp/pydantic SDK for the same two calls). Nothing here imports pyspark.

Bounds, as the Schema Registry client's (:mod:`kafka_group.bounded_http`): one deadline,
``timeout_s``, for a whole :meth:`UnityCatalog.resolve` (both calls: connections, requests,
answers), however slowly the server sends; at most :data:`_MAX_RESPONSE` bytes per answer; no
redirect followed (it would carry the token on). A token goes over plain ``http://`` only to
loopback, unless the caller passes ``allow_plain_http=True``.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Mapping, NoReturn, Optional

from kafka_group.bounded_http import Late, Redirected, TooBig, fetch
from kafka_group.delta.storage.table_names import ResolvedTable, parse_table_name
from kafka_group.errors import ConfigError, OffsetStoreError
from kafka_group.json_text import NotJson, parse_json
from kafka_group.redaction import register_secret, register_storage_secrets

__all__ = ["UnityCatalog", "storage_options_of"]

logger = logging.getLogger(__name__)

#: The API's root under the server's address.
API_ROOT = "/api/2.1/unity-catalog"
#: The most of an answer read, headers included (a table's info and credentials are a few KiB).
_MAX_RESPONSE = 1 << 20


class UnityCatalog:
    """A Unity Catalog server that resolves ``catalog.schema.table`` to a location and credentials.

    Parameters
    ----------
    uri : str
        The server's address (``https://uc.example.com``, ``http://127.0.0.1:8080``), without
        ``/api/2.1/unity-catalog``, without a user name or password (give ``token``).
    token : str, optional
        A bearer token (personal access token, OAuth token); a secret, sent only to ``uri``, and
        over plain ``http://`` only to loopback (``127.0.0.0/8``, ``::1``, ``localhost``).
    timeout_s : float
        The most one :meth:`resolve` takes, both of its calls together, however slowly the
        server answers (the name lookup of its host aside: the system resolver's own timeouts).
    allow_plain_http : bool
        Send ``token`` over plain ``http://`` to a host other than loopback. Off by default: anyone
        on the network path reads the token and the storage credentials that come back. Only
        for a network you trust end to end.

    Raises
    ------
    ConfigError
        ``uri`` is not an ``http(s)://`` address of a server, holds a user name or password, or
        a ``token`` would go over plain ``http://`` to another host without ``allow_plain_http``.

    Notes
    -----
    Caller: the driver (DeltaSink's ``foreachBatch`` function, or the user's code before the
    query starts); one request at a time per call, no shared state, so any thread.
    """

    def __init__(self, uri: str, *, token: Optional[str] = None, timeout_s: float = 30.0,
                 allow_plain_http: bool = False) -> None:
        text = uri.strip() if isinstance(uri, str) else ""
        parsed = urllib.parse.urlsplit(text)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            got = f"one of scheme {parsed.scheme[:10]!r}" if parsed.scheme else "no such address"
            raise ConfigError(f"UnityCatalog(uri=...) must be an http(s) address such as 'https://uc.example.com', "
                              f"got {got}")  # not the text: a token given in the wrong place would show
        if "@" in parsed.netloc:  # never shown: the part before '@' is a user name and maybe a password
            raise ConfigError(f"UnityCatalog(uri=...) holds a user name or password ({parsed.scheme}://***@...): "
                              "Unity Catalog authenticates with a bearer token: give it as token=... and the "
                              "address without them")
        try:
            host, _ = parsed.hostname, parsed.port
        except ValueError:
            host = None
        if not host or parsed.query or parsed.fragment:
            raise ConfigError("UnityCatalog(uri=...) must be a server's address such as 'https://uc.example.com' "
                              "(a host, an optional port and path; no '?' or '#' part)")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) \
                or timeout_s <= 0:
            raise ConfigError(f"UnityCatalog(timeout_s=...) must be a positive number of seconds, got {timeout_s!r}")
        if token is not None and (not isinstance(token, str) or not token.isprintable() or token != token.strip()):
            raise ConfigError("UnityCatalog(token=...) must be the token's text alone (printable characters, no "
                              "spaces or line breaks around it)")
        register_secret(token)
        self.uri = text.rstrip("/")
        self._token = token
        self.timeout_s = float(timeout_s)
        if parsed.scheme == "http" and not _is_loopback(host):
            if token and not allow_plain_http:
                raise ConfigError(
                    f"UnityCatalog(token=...) would go over plain http:// to {host}, which is not this machine: "
                    "anyone on the network path could read the token and the storage credentials that come back. "
                    "Give the server's https:// address, or pass allow_plain_http=True for a network you trust "
                    "end to end")
            if not allow_plain_http:
                logger.warning("Unity Catalog at %s is reached over plain http://: the temporary storage "
                               "credentials it hands out travel unencrypted (use its https:// address)", self.uri)

    def __repr__(self) -> str:  # never the token; the address holds no user name or password
        return f"UnityCatalog({self.uri!r})"

    def resolve(self, name: str) -> ResolvedTable:
        """The Delta table ``name`` (``catalog.schema.table``): its location and temporary
        ``READ_WRITE`` credentials as delta-rs storage options, within ``timeout_s``.

        Raises
        ------
        ConfigError
            ``name`` is not a three-part name, or the table is not a Delta table.
        OffsetStoreError
            The server refused or failed a call (its HTTP status and UC error code named), gave
            no whole answer within ``timeout_s``, answered more than 1 MiB or with a redirect,
            or answered what is not a table's info or credentials.
        """
        parts = parse_table_name(name)
        if len(parts) != 3:
            raise ConfigError(f"a Unity Catalog table is named 'catalog.schema.table', got {name!r}")
        full_name = ".".join(parts)
        deadline = time.monotonic() + self.timeout_s  # one for both calls
        info = self._call("GET", "/tables/" + urllib.parse.quote(full_name, safe=""), None, full_name, deadline)
        location, table_id, fmt = info.get("storage_location"), info.get("table_id"), info.get("data_source_format")
        if not isinstance(location, str) or not location or not isinstance(table_id, str) or not table_id:
            raise OffsetStoreError(f"Unity Catalog at {self.uri} answered no storage_location and table_id for "
                                   f"table '{full_name}'")
        if str(fmt).upper() != "DELTA":
            raise ConfigError(f"Unity Catalog table '{full_name}' is a {str(fmt)[:40]} table, not a Delta table: "
                              "DeltaSink writes Delta tables only")
        credentials = self._call("POST", "/temporary-table-credentials",
                                 {"table_id": table_id, "operation": "READ_WRITE"}, full_name, deadline)
        options = storage_options_of(credentials, full_name)
        register_storage_secrets(options)
        expires = credentials.get("expiration_time")
        logger.info("resolved Unity Catalog table '%s' to %s", full_name, location)
        return ResolvedTable(full_name, location, options,
                             expires if isinstance(expires, int) and not isinstance(expires, bool) else None)

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]], table: str,
              deadline: float) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        request = urllib.request.Request(self.uri + API_ROOT + path, data=data, method=method, headers=headers)
        what = f"Unity Catalog at {self.uri} ({method} {API_ROOT}{path}) for table '{table}'"
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise Late()
            raw = fetch(request, timeout_s=left, max_bytes=_MAX_RESPONSE)
        except Redirected as exc:
            raise OffsetStoreError(f"{what} answered HTTP {exc.code}, a redirect, which is not followed (the token "
                                   "stays with the catalog's address): give UnityCatalog the address it redirects "
                                   "to") from None
        except urllib.error.HTTPError as exc:
            try:
                code = _error_code(exc)
            finally:
                exc.close()
            raise OffsetStoreError(f"{what} answered HTTP {exc.code}{code}: check the name, the token and its "
                                   "privileges (USE CATALOG, USE SCHEMA, SELECT, MODIFY; EXTERNAL USE SCHEMA for "
                                   "temporary credentials)") from None
        except TooBig:
            raise OffsetStoreError(f"{what} answered more than {_MAX_RESPONSE} bytes: is {self.uri} a Unity Catalog "
                                   "server?") from None
        except (Late, TimeoutError):
            self._late(what)
        except (http.client.HTTPException, ValueError) as exc:  # ValueError: http.client's bad chunk size
            raise OffsetStoreError(f"{what} answered no valid HTTP ({type(exc).__name__}): is {self.uri} a Unity "
                                   "Catalog server?") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                self._late(what)
            raise OffsetStoreError(f"{what} failed: {type(reason).__name__}: {reason}") from None
        try:
            doc = parse_json(raw)
        except NotJson:
            doc = None
        if not isinstance(doc, dict):
            raise OffsetStoreError(f"{what} answered what is not a JSON object")
        return doc

    def _late(self, what: str) -> NoReturn:
        raise OffsetStoreError(f"{what} gave no whole answer within {self.timeout_s:g} s (timeout_s, one deadline "
                               f"for both calls of resolve()): check that {self.uri} is the catalog's address and "
                               "that it is not overloaded, or give UnityCatalog a larger timeout_s") from None


def _is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's host, as written: no name is looked up) is this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _error_code(exc: urllib.error.HTTPError) -> str:
    """`` (<UC error code>)`` from an error response's body, when it has a plain one; never the body itself."""
    try:
        code = json.loads(exc.read(4096)).get("error_code")
    except Exception:  # noqa: BLE001 - any body: no code to name
        return ""
    return f" ({code})" if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) < 64 else ""


def storage_options_of(credentials: Mapping[str, Any], table: str) -> Dict[str, str]:
    """delta-rs storage options for Unity Catalog's temporary credentials (a secret: never logged).

    ``aws_temp_credentials`` become ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
    ``AWS_SESSION_TOKEN``; ``azure_user_delegation_sas`` becomes ``AZURE_STORAGE_SAS_TOKEN``.

    Raises
    ------
    OffsetStoreError
        The credentials are of another kind (``gcp_oauth_token``: delta-rs takes no bearer token
        for Google Cloud Storage), or none: the message says to give storage options instead.
    """
    aws, azure = credentials.get("aws_temp_credentials"), credentials.get("azure_user_delegation_sas")
    if isinstance(aws, dict) and all(isinstance(aws.get(k), str) for k in ("access_key_id", "secret_access_key")):
        options = {"AWS_ACCESS_KEY_ID": aws["access_key_id"], "AWS_SECRET_ACCESS_KEY": aws["secret_access_key"]}
        if isinstance(aws.get("session_token"), str):
            options["AWS_SESSION_TOKEN"] = aws["session_token"]
        return options
    if isinstance(azure, dict) and isinstance(azure.get("sas_token"), str):
        return {"AZURE_STORAGE_SAS_TOKEN": azure["sas_token"]}
    kinds = sorted(k for k in credentials if k.endswith(("credentials", "sas", "token")))
    raise OffsetStoreError(
        f"Unity Catalog gave table '{table}' credentials of a kind delta-rs cannot take "
        f"({', '.join(kinds) or 'none'}): give DeltaSink(storage_options=...) and the source's "
        "offsets.table.storage.* options credentials of your own for its location"
    )
