"""Unity Catalog: a table's location and temporary credentials, through its REST API.

Two calls of the open Unity Catalog API (the same on Databricks, under ``/api/2.1/unity-catalog``):
``GET /tables/{full_name}`` (the table's id, ``storage_location`` and format) and
``POST /temporary-table-credentials`` (credentials for that location, for ``READ_WRITE``).
The credentials become delta-rs storage options (:func:`storage_options_of`). They are
secrets: no log line, error or ``repr`` holds them, nor the catalog token. Plain
``urllib`` keeps the dependency list short (PyPI's ``unitycatalog-client`` is an
asynchronous aiohttp/pydantic SDK for the same two calls). Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Mapping, Optional

from kafka_group.delta.table_names import ResolvedTable, parse_table_name
from kafka_group.errors import ConfigError, OffsetStoreError

__all__ = ["UnityCatalog", "storage_options_of"]

logger = logging.getLogger(__name__)

#: The API's root under the server's address.
API_ROOT = "/api/2.1/unity-catalog"
#: The most of a response read (a table's info and credentials are a few KiB).
_MAX_RESPONSE = 1 << 20


class UnityCatalog:
    """A Unity Catalog server that resolves ``catalog.schema.table`` to a location and credentials.

    Parameters
    ----------
    uri : str
        The server's address (``https://uc.example.com``, ``http://127.0.0.1:8080``), without
        ``/api/2.1/unity-catalog``.
    token : str, optional
        A bearer token (personal access token, OAuth token); a secret, sent only to ``uri``.
    timeout_s : float
        Each request's timeout.

    Notes
    -----
    Caller: the driver (DeltaSink's ``foreachBatch`` function, or the user's code before the
    query starts); one request at a time per call, no shared state, so any thread.
    """

    def __init__(self, uri: str, *, token: Optional[str] = None, timeout_s: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(uri.strip() if isinstance(uri, str) else "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"UnityCatalog(uri=...) must be an http(s) address such as 'https://uc.example.com', "
                              f"got {uri!r}")
        self.uri = uri.strip().rstrip("/")
        self._token = token
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never the token
        return f"UnityCatalog({self.uri!r})"

    def resolve(self, name: str) -> ResolvedTable:
        """The Delta table ``name`` (``catalog.schema.table``): its location and temporary
        ``READ_WRITE`` credentials as delta-rs storage options.

        Raises
        ------
        ConfigError
            ``name`` is not a three-part name, or the table is not a Delta table.
        OffsetStoreError
            The server refused or failed a call (its HTTP status and UC error code named), or
            answered what is not a table's info or credentials.
        """
        parts = parse_table_name(name)
        if len(parts) != 3:
            raise ConfigError(f"a Unity Catalog table is named 'catalog.schema.table', got {name!r}")
        full_name = ".".join(parts)
        info = self._call("GET", "/tables/" + urllib.parse.quote(full_name, safe=""), None, full_name)
        location, table_id, fmt = info.get("storage_location"), info.get("table_id"), info.get("data_source_format")
        if not isinstance(location, str) or not location or not isinstance(table_id, str) or not table_id:
            raise OffsetStoreError(f"Unity Catalog at {self.uri} answered no storage_location and table_id for "
                                   f"table '{full_name}'")
        if str(fmt).upper() != "DELTA":
            raise ConfigError(f"Unity Catalog table '{full_name}' is a {str(fmt)[:40]} table, not a Delta table: "
                              "DeltaSink writes Delta tables only")
        credentials = self._call("POST", "/temporary-table-credentials",
                                 {"table_id": table_id, "operation": "READ_WRITE"}, full_name)
        expires = credentials.get("expiration_time")
        logger.info("resolved Unity Catalog table '%s' to %s", full_name, location)
        return ResolvedTable(full_name, location, storage_options_of(credentials, full_name),
                             expires if isinstance(expires, int) else None)

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]], table: str) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.uri + API_ROOT + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._token:
            request.add_header("Authorization", "Bearer " + self._token)
        what = f"Unity Catalog at {self.uri} ({method} {API_ROOT}{path})"
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as response:
                raw = response.read(_MAX_RESPONSE + 1)
        except urllib.error.HTTPError as exc:
            raise OffsetStoreError(f"{what} for table '{table}' answered HTTP {exc.code}{_error_code(exc)}: check "
                                   "the name, the token and its privileges (USE CATALOG, USE SCHEMA, SELECT, "
                                   "MODIFY; EXTERNAL USE SCHEMA for temporary credentials)") from None
        except (urllib.error.URLError, OSError) as exc:
            raise OffsetStoreError(f"{what} for table '{table}' failed: {type(exc).__name__}: "
                                   f"{getattr(exc, 'reason', exc)}") from None
        if len(raw) > _MAX_RESPONSE:
            raise OffsetStoreError(f"{what} for table '{table}' answered more than {_MAX_RESPONSE} bytes")
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise OffsetStoreError(f"{what} for table '{table}' answered what is not a JSON object")
        return doc


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would send the token's ``Authorization`` header on to wherever one points."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        raise urllib.error.HTTPError(req.full_url, code, "redirects are not followed (the token stays with the "
                                     "catalog's address): give UnityCatalog the address it redirects to", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirects)


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
