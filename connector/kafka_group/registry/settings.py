"""What a query decodes with a Schema Registry: the parsed registry options (no network here)."""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, Optional

from kafka_group.errors import ConfigError
from kafka_group.redaction import register_secret

__all__ = ["SideDecoding", "RegistryOptions", "KEY", "VALUE"]

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
    """

    url: str
    key: Optional[SideDecoding]
    value: Optional[SideDecoding]
    quarantine: bool = False
    user_info: Optional[str] = field(default=None, repr=False)
    bearer_token: Optional[str] = field(default=None, repr=False)

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
        return out  # the header's value is "Basic " or "Bearer " and one of these: its scheme stays readable
