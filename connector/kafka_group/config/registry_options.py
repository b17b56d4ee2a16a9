"""The Schema Registry options, read through their catalog declarations and checked together."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence
from urllib.parse import unquote

from kafka_group.config import option_catalog as catalog
from kafka_group.errors import ConfigError
from kafka_group.registry.oauth import OAuthClient
from kafka_group.registry.settings import KEY, VALUE, RegistryOptions, RegistryTls, SideDecoding

__all__ = ["parse_registry_options"]

_SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}


def parse_registry_options(opts: Mapping[str, str], topics: Sequence[str]) -> Optional[RegistryOptions]:
    """The registry options, or None when both sides are read raw (and no registry option is set).

    Parameters
    ----------
    opts : mapping of str to str
        The source's options, keys lower-cased.
    topics : sequence of str
        The topics read when they are known at load() (``subscribe``, ``assign``); empty with a pattern.

    Raises
    ------
    ConfigError
        A registry option is malformed, or the combination cannot work; the message names the fix.
    """
    url = catalog.SCHEMA_REGISTRY_ADDRESS.get(opts)
    user_info = catalog.SCHEMA_REGISTRY_USER_INFO.get(opts)
    token = catalog.SCHEMA_REGISTRY_BEARER_TOKEN.get(opts)
    retries = (catalog.SCHEMA_REGISTRY_MAX_RETRIES.value(opts), catalog.SCHEMA_REGISTRY_RETRIES_WAIT_MS.value(opts),
               catalog.SCHEMA_REGISTRY_RETRIES_MAX_WAIT_MS.value(opts))
    oauth = _oauth(opts)
    for spec in (catalog.SCHEMA_REGISTRY_SSL_CA_LOCATION, catalog.SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION,
                 catalog.SCHEMA_REGISTRY_SSL_KEY_LOCATION, catalog.SCHEMA_REGISTRY_SSL_KEY_PASSWORD):
        spec.get(opts)  # a malformed value is refused before the combination is checked
    sides = {side: _side(opts, side, topics) for side in (KEY, VALUE)}
    quarantine = catalog.BAD_RECORDS.value(opts) == "quarantine"
    if sides[KEY] is None and sides[VALUE] is None:
        given = [o.name for o in _REGISTRY_ONLY if o.key in opts]
        if given:
            raise ConfigError(
                f"option '{given[0]}' needs a registry format: set 'valueFormat' (or 'keyFormat') to avro, "
                "protobuf or json, or remove the option")
        return None
    if url is None:
        raise ConfigError(
            "option 'schemaRegistryAddress' is needed by 'keyFormat'/'valueFormat' other than raw: each record "
            "names its writer schema by id, which only the registry knows. Set it to the registry's URL")
    url, in_url = _split_user_info(url)
    if in_url is not None:
        if user_info is not None or token is not None:
            raise ConfigError("option 'schemaRegistryAddress' has a user:password@ and another authentication "
                              "option is set: keep one")
        user_info = in_url
    if oauth is not None and (user_info is not None or token is not None):
        raise ConfigError("option 'schemaRegistry.bearer.auth.issuer.endpoint.url' (OAuth client credentials) and "
                          "'schemaRegistry.basic.auth.user.info' or 'schemaRegistry.bearer.auth.token' (or a "
                          "user:password@ in 'schemaRegistryAddress') are set: the registry takes one kind of "
                          "authentication. Remove one")
    if user_info is not None and token is not None:
        raise ConfigError(
            "options 'schemaRegistry.basic.auth.user.info' and 'schemaRegistry.bearer.auth.token' are both set: "
            "the registry takes one kind of authentication. Remove one")
    return RegistryOptions(url=url, key=sides[KEY], value=sides[VALUE], quarantine=quarantine,
                           user_info=user_info, bearer_token=token, tls=_tls(opts, url), oauth=oauth,
                           max_retries=retries[0],
                           retry_wait_ms=retries[1], retry_max_wait_ms=retries[2])


def _oauth(opts: Mapping[str, str]) -> Optional[OAuthClient]:
    endpoint = catalog.SCHEMA_REGISTRY_OAUTH_ENDPOINT.get(opts)
    client_id = catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_ID.get(opts)
    secret = catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET.get(opts)
    scope = catalog.SCHEMA_REGISTRY_OAUTH_SCOPE.get(opts)
    if endpoint is None:
        given = [s.name for s in (catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_ID, catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET,
                                  catalog.SCHEMA_REGISTRY_OAUTH_SCOPE) if s.key in opts]
        if given:
            raise ConfigError(f"option '{given[0]}' needs 'schemaRegistry.bearer.auth.issuer.endpoint.url' (the OAuth "
                              "issuer's token endpoint): set it, or remove the option")
        return None
    if client_id is None or secret is None:
        raise ConfigError("option 'schemaRegistry.bearer.auth.issuer.endpoint.url' needs "
                          "'schemaRegistry.bearer.auth.client.id' and 'schemaRegistry.bearer.auth.client.secret' "
                          "(the client credentials): set them")
    return OAuthClient(endpoint, client_id, secret, scope)


def _tls(opts: Mapping[str, str], url: str) -> Optional[RegistryTls]:
    tls = RegistryTls(catalog.SCHEMA_REGISTRY_SSL_CA_LOCATION.get(opts),
                      catalog.SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION.get(opts),
                      catalog.SCHEMA_REGISTRY_SSL_KEY_LOCATION.get(opts),
                      catalog.SCHEMA_REGISTRY_SSL_KEY_PASSWORD.get(opts))
    if tls == RegistryTls():
        return None
    if tls.certificate_location is None and (tls.key_location is not None or tls.key_password is not None):
        raise ConfigError("options 'schemaRegistry.ssl.key.location'/'schemaRegistry.ssl.key.password' need "
                          "'schemaRegistry.ssl.certificate.location' (the client certificate of that key): set it")
    if not url.lower().startswith("https://"):
        raise ConfigError("the 'schemaRegistry.ssl.*' options need an https:// 'schemaRegistryAddress': the "
                          "registry's address is http://, which uses no TLS")
    return tls


def _split_user_info(url: str) -> "tuple[str, Optional[str]]":
    """``url`` without its ``user:password@``, and that user info (sent as basic authentication)."""
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if "@" not in host:
        return url, None
    info, _, host = host.rpartition("@")
    return f"{scheme}://{host}{slash}{path}", unquote(info)


def _side(opts: Mapping[str, str], side: str, topics: Sequence[str]) -> Optional[SideDecoding]:
    fmt_spec, subject_spec, version_spec, schema_spec = (
        (catalog.KEY_FORMAT, catalog.KEY_SUBJECT, catalog.KEY_SCHEMA_VERSION, catalog.KEY_SCHEMA) if side == KEY
        else (catalog.VALUE_FORMAT, catalog.VALUE_SUBJECT, catalog.VALUE_SCHEMA_VERSION, catalog.VALUE_SCHEMA))
    fmt = fmt_spec.value(opts)
    subject = subject_spec.get(opts)
    version = version_spec.value(opts)
    schema = schema_spec.get(opts)
    if fmt == "raw":
        for spec in (subject_spec, version_spec, schema_spec):
            if spec.key in opts:
                raise ConfigError(f"option '{spec.name}' needs '{fmt_spec.name}' avro, protobuf or json (it is raw). "
                                  f"Set '{fmt_spec.name}', or remove the option")
        return None
    if schema is not None:
        if subject is not None or version_spec.key in opts:
            raise ConfigError(f"option '{schema_spec.name}' gives the reader schema itself: remove "
                              f"'{subject_spec.name}' and '{version_spec.name}', or '{schema_spec.name}'")
        return SideDecoding(side, _SCHEMA_TYPES[fmt], None, version, schema)
    if subject is None:
        if len(set(topics)) != 1:
            raise ConfigError(
                f"option '{fmt_spec.name}' reads with one reader schema, by default of subject '<topic>-{side}', "
                f"but the query reads {'a pattern of topics' if not topics else f'{len(set(topics))} topics'}. "
                f"Set '{subject_spec.name}' (or '{schema_spec.name}')")
        subject = f"{topics[0]}-{side}"
    return SideDecoding(side, _SCHEMA_TYPES[fmt], subject, version, None)


_REGISTRY_ONLY = (catalog.SCHEMA_REGISTRY_ADDRESS, catalog.SCHEMA_REGISTRY_USER_INFO,
                  catalog.SCHEMA_REGISTRY_BEARER_TOKEN, catalog.SCHEMA_REGISTRY_SSL_CA_LOCATION,
                  catalog.SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION, catalog.SCHEMA_REGISTRY_SSL_KEY_LOCATION,
                  catalog.SCHEMA_REGISTRY_SSL_KEY_PASSWORD, catalog.SCHEMA_REGISTRY_MAX_RETRIES,
                  catalog.SCHEMA_REGISTRY_RETRIES_WAIT_MS, catalog.SCHEMA_REGISTRY_RETRIES_MAX_WAIT_MS,
                  catalog.SCHEMA_REGISTRY_OAUTH_ENDPOINT, catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_ID,
                  catalog.SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET, catalog.SCHEMA_REGISTRY_OAUTH_SCOPE,
                  catalog.BAD_RECORDS)
