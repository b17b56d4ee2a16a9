"""What a query decodes with a Schema Registry: the parsed registry options (no network here)."""

from __future__ import annotations

import base64
import functools
import os
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from kafka_group.errors import ConfigError
from kafka_group.redaction import register_secret
from kafka_group.registry.oauth import OAuthClient

__all__ = ["SideDecoding", "RegistryOptions", "RegistryTls", "KEY", "VALUE"]

#: The two sides of a record a registry format can decode.
KEY, VALUE = "key", "value"


@dataclass(frozen=True)
class SideDecoding:
    """How one side (``key`` or ``value``) is decoded.

    Attributes
    ----------
    side : str
        ``key`` or ``value``.
    schema_type : str
        The registry's schema type: ``AVRO``, ``PROTOBUF`` or ``JSON``.
    subject : str or None
        The subject of the reader schema (None with an explicit ``schema_text``).
    version : str
        ``latest`` or a version number of ``subject``.
    schema_text : str or None
        An explicit reader schema.
    """

    side: str
    schema_type: str
    subject: Optional[str]
    version: str = "latest"
    schema_text: Optional[str] = None

    def describe(self) -> str:
        """The reader schema's origin, for messages: ``subject 'orders-value' version latest``."""
        if self.schema_text is not None:
            return f"the explicit {self.side}Schema"
        return f"subject '{self.subject}' version {self.version}"


@dataclass(frozen=True)
class RegistryTls:
    """TLS settings of an ``https://`` registry beyond the system's trust store.

    Attributes
    ----------
    ca_location : str or None
        PEM file of the CA(s) to trust instead of the system's (``schemaRegistry.ssl.ca.location``).
    certificate_location, key_location : str or None
        PEM files of the client certificate (its chain may follow it) and of its private key, for
        mutual TLS (``schemaRegistry.ssl.certificate.location``, ``schemaRegistry.ssl.key.location``;
        the key may be in the certificate's file).
    key_password : str or None
        The password of an encrypted key (``schemaRegistry.ssl.key.password``). Secret: not in ``repr``.
    """

    ca_location: Optional[str] = None
    certificate_location: Optional[str] = None
    key_location: Optional[str] = None
    key_password: Optional[str] = field(default=None, repr=False)

    def context(self) -> ssl.SSLContext:
        """The SSL context (made once per process, settings and version of the files).

        Raises
        ------
        ConfigError
            A file cannot be read or holds no certificate or key, naming the option.
        """
        if self.key_password is not None:
            register_secret(self.key_password)
        # The files' change times are part of the cache key: a certificate renewed on disk is read again.
        stamps = tuple(_changed(path) for path in (self.ca_location, self.certificate_location, self.key_location))
        return _context(self.ca_location, self.certificate_location, self.key_location, self.key_password, stamps)


def _changed(path: Optional[str]) -> Optional[int]:
    try:
        return os.stat(path).st_mtime_ns if path else None
    except OSError:
        return None  # the context's own read names the option


@functools.lru_cache(maxsize=16)
def _context(ca: Optional[str], certificate: Optional[str], key: Optional[str], password: Optional[str],
             stamps: Tuple[Optional[int], ...]) -> ssl.SSLContext:
    # Host names are checked and certificates verified as by default (create_default_context).
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"option 'schemaRegistry.ssl.ca.location' ('{ca}') is not a readable PEM file of CA "
                          f"certificates ({getattr(exc, 'strerror', None) or exc}): fix the path") from None
    if certificate is not None:
        try:
            context.load_cert_chain(certificate, key, password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"options 'schemaRegistry.ssl.certificate.location' ('{certificate}') and "
                f"'schemaRegistry.ssl.key.location' ('{key or certificate}') do not hold a PEM certificate and its "
                f"private key ({type(exc).__name__}; a wrong 'schemaRegistry.ssl.key.password' too): fix them") from None
    return context


@dataclass(frozen=True)
class RegistryOptions:
    """The registry and what to decode with it.

    Attributes
    ----------
    url : str
        The registry's base URL (``schemaRegistryAddress``), without a trailing slash.
    user_info : str or None
        ``user:password`` of HTTP basic authentication. Secret: not in ``repr``.
    bearer_token : str or None
        A bearer token. Secret: not in ``repr``.
    key, value : SideDecoding or None
        What to decode; None leaves the side raw bytes.
    quarantine : bool
        ``badRecords=quarantine``: bad records land with their bytes and an error column.
    tls : RegistryTls or None
        TLS settings beyond the system's trust store.
    oauth : OAuthClient or None
        OAuth client credentials: a bearer token from the issuer (not with the other authentications).
    max_retries : int
        How many times a request that may pass (unreachable, HTTP 429 or 5xx, no answer in time) is
        sent again, within the lookup's one deadline (``schemaRegistry.max.retries``).
    retry_wait_ms, retry_max_wait_ms : int
        The wait before the first retry, doubled at each next one up to the second
        (``schemaRegistry.retries.wait.ms``, ``schemaRegistry.retries.max.wait.ms``).
    """

    url: str
    key: Optional[SideDecoding]
    value: Optional[SideDecoding]
    quarantine: bool = False
    user_info: Optional[str] = field(default=None, repr=False)
    bearer_token: Optional[str] = field(default=None, repr=False)
    tls: Optional[RegistryTls] = None
    oauth: Optional[OAuthClient] = None
    max_retries: int = 3
    retry_wait_ms: int = 1000
    retry_max_wait_ms: int = 20000

    def ssl_context(self) -> Optional[ssl.SSLContext]:
        """The SSL context of ``tls`` (None: the system's defaults)."""
        return self.tls.context() if self.tls is not None else None

    def headers(self) -> Dict[str, str]:
        """The HTTP headers of a request to the registry (authentication).

        The ``Authorization`` value leaves the process, so each of its forms is registered for
        scrubbing here, where it is made (also in a process that did not parse the options).
        """
        header = self._authorization()
        if header is None:
            return {}
        for secret in self.secrets().values():
            register_secret(secret)
        if not all(" " <= c <= "~" for c in header):  # http.client would refuse it with the value in its error
            raise ConfigError("option 'schemaRegistry.basic.auth.user.info' or 'schemaRegistry.bearer.auth.token' "
                              "holds a character HTTP cannot send (a line break, a control character, or outside "
                              "ASCII; the value is not shown): fix the secret")
        return {"Authorization": header}

    def _authorization(self) -> Optional[str]:
        if self.user_info is not None:
            return "Basic " + base64.b64encode(self.user_info.encode()).decode("ascii")
        if self.bearer_token is not None:
            return "Bearer " + self.bearer_token
        return None

    def secrets(self) -> Dict[str, str]:
        """The secret values, to register for scrubbing: the password, ``user:password``, the token, and
        every form of them that leaves the process or may come back (the base64 of the ``Authorization``
        header's value, also with JSON's escaped ``\\/``, without padding, and percent-encoded)."""
        out: Dict[str, str] = {}
        if self.user_info is not None:
            out["user_info"] = self.user_info
            out["password"] = self.user_info.partition(":")[2]
            encoded = base64.b64encode(self.user_info.encode()).decode("ascii")
            forms = {encoded, encoded.rstrip("="), encoded.replace("/", "\\/"), urllib.parse.quote(encoded, safe=""),
                     urllib.parse.quote(self.user_info, safe=""), urllib.parse.quote(out["password"], safe="")}
            out.update((f"basic_{i}", form) for i, form in enumerate(sorted(forms)))
        if self.bearer_token is not None:
            out["token"] = self.bearer_token
            out["token_quoted"] = urllib.parse.quote(self.bearer_token, safe="")
        if self.oauth is not None:
            out["oauth_client_secret"] = self.oauth.client_secret
        if self.tls is not None and self.tls.key_password is not None:
            out["ssl_key_password"] = self.tls.key_password
        return out  # the header's value is "Basic " or "Bearer " and one of these: its scheme stays readable
