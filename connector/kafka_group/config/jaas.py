"""Java's ``sasl.jaas.config``, read and turned into librdkafka's SASL settings.

A JAAS configuration names one login module, a control flag and ``key=value`` options::

    org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret";

Values are quoted with ``"`` or ``'`` (a backslash escapes the next character) or bare words,
as Java's ``JaasConfig`` reads them; Databricks' shaded class names (``kafkashaded.org.apache...``)
are the same modules. :func:`parse_jaas` reads the text; :func:`jaas_settings` maps the
module to librdkafka's settings. Values never appear in an error message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Tuple

from kafka_group.errors import ConfigError

__all__ = ["JaasModule", "parse_jaas", "jaas_settings", "module_class"]

_OPTION = "kafka.sasl.jaas.config"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_SHADED_PREFIXES = ("kafkashaded.", "shadedmskiam.")

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KERBEROS = "com.sun.security.auth.module.Krb5LoginModule"
MSK_IAM_LOGIN = "software.amazon.msk.auth.iam.IAMLoginModule"


@dataclass(frozen=True)
class JaasModule:
    """One login module of a JAAS configuration.

    Attributes
    ----------
    name : str
        The class name without a shading prefix (``kafkashaded.``).
    options : dict
        Its options (values are secrets: never shown).
    """

    name: str
    options: Mapping[str, str] = field(repr=False)


def module_class(name: str) -> str:
    """A Java class name without a shading prefix (``kafkashaded.``, ``shadedmskiam.``)."""
    for prefix in _SHADED_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _tokens(text: str) -> List[Tuple[str, bool]]:
    """The words, ``=``, ``;`` and quoted strings of ``text``; True marks a quoted string."""
    tokens: List[Tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            tokens.append((c, False))
            i += 1
        elif c in "\"'":
            quote, i, chars = c, i + 1, []
            while i < n and text[i] != quote:
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
            if i >= n:
                raise ConfigError(f"option '{_OPTION}' has a quoted value without its closing {quote}")
            tokens.append(("".join(chars), True))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in "=;\"'":
                i += 1
            tokens.append((text[start:i], False))
    return tokens


def parse_jaas(text: str) -> JaasModule:
    """The one login module of ``text`` (a ``sasl.jaas.config`` value).

    Raises
    ------
    ConfigError
        Not of the form ``<LoginModule> required key="value" ...;`` or more than one module
        (Kafka's clients accept exactly one). The message never shows a value.
    """
    form = "<LoginModule class> required key=\"value\" ...;"
    tokens = _tokens(text)
    modules: List[JaasModule] = []
    i = 0
    while i < len(tokens):
        name, quoted = tokens[i]
        if quoted or name in "=;" or i + 1 >= len(tokens) or tokens[i + 1][0].lower() not in _FLAGS:
            raise ConfigError(f"option '{_OPTION}' is not a JAAS configuration of the form {form}")
        i += 2
        options: Dict[str, str] = {}
        while i < len(tokens) and tokens[i] != (";", False):
            key, key_quoted = tokens[i]
            if (key_quoted or i + 2 >= len(tokens) or tokens[i + 1] != ("=", False)
                    or tokens[i + 2] in ((";", False), ("=", False))):
                # No token in the message: with quoting gone wrong it may be a part of a password.
                raise ConfigError(f"option '{_OPTION}' has a malformed option of module {module_class(name)} "
                                  f"(check the quotes): write {form}")
            options[key] = tokens[i + 2][0]
            i += 3
        if i >= len(tokens):
            raise ConfigError(f"option '{_OPTION}' does not end with ';': write {form}")
        i += 1
        modules.append(JaasModule(module_class(name), options))
    if len(modules) != 1:
        raise ConfigError(f"option '{_OPTION}' must name exactly one login module (as Kafka's clients require), "
                          f"got {len(modules)}")
    return modules[0]


def _need(module: JaasModule, *keys: str) -> List[str]:
    missing = [k for k in keys if not module.options.get(k)]
    if missing:
        raise ConfigError(f"option '{_OPTION}': {module.name.rpartition('.')[2]} needs "
                          f"{' and '.join(repr(k) for k in missing)}")
    return [module.options[k] for k in keys]


def _unsecured_oauthbearer(module: JaasModule) -> Dict[str, str]:
    """Kafka's unsecured OAUTHBEARER login options as librdkafka's ``sasl.oauthbearer.config``."""
    opts = dict(module.options)
    principal_claim = opts.pop("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = opts.pop("unsecuredLoginScopeClaimName", "scope")
    parts: List[str] = []
    if principal_claim != "sub":
        parts.append(f"principalClaimName={principal_claim}")
    principal = opts.pop(f"unsecuredLoginStringClaim_{principal_claim}", None)
    if not principal:
        raise ConfigError(f"option '{_OPTION}': OAuthBearerLoginModule needs "
                          f"'unsecuredLoginStringClaim_{principal_claim}' (the principal) or an OIDC token "
                          "endpoint ('kafka.sasl.oauthbearer.token.endpoint.url' with clientId and clientSecret)")
    parts.append(f"principal={principal}")
    if scope_claim != "scope":
        parts.append(f"scopeClaimName={scope_claim}")
    scope = opts.pop(f"unsecuredLoginListClaim_{scope_claim}", None)
    if scope:  # Java's list syntax: the first character is the separator
        parts.append("scope=" + ",".join(s for s in scope[1:].split(scope[0]) if s))
    lifetime = opts.pop("unsecuredLoginLifetimeSeconds", None)
    if lifetime:
        parts.append(f"lifeSeconds={lifetime}")
    for key in sorted(k for k in opts if k.startswith("unsecuredLoginExtension_")):
        parts.append(f"extension_{key[len('unsecuredLoginExtension_'):]}={opts.pop(key)}")
    if any(" " in p for p in parts):
        raise ConfigError(f"option '{_OPTION}': an unsecured OAUTHBEARER claim or extension contains a blank, "
                          "which librdkafka's 'sasl.oauthbearer.config' cannot carry")
    if opts:
        raise ConfigError(f"option '{_OPTION}': OAuthBearerLoginModule option '{sorted(opts)[0]}' has no librdkafka "
                          "equivalent (librdkafka's unsecured tokens carry a principal, scope, lifeSeconds and "
                          "extensions: 'kafka.sasl.oauthbearer.config'). Remove it")
    return {"sasl.oauthbearer.config": " ".join(parts), "enable.sasl.oauthbearer.unsecure.jwt": "true"}


def _oidc(module: JaasModule) -> Dict[str, str]:
    """Kafka's OIDC client-credentials login (``OAuthBearerLoginCallbackHandler``) as librdkafka's ``oidc``."""
    opts = dict(module.options)
    client_id, client_secret = _need(module, "clientId", "clientSecret")
    opts.pop("clientId"), opts.pop("clientSecret")
    settings = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": client_id,
                "sasl.oauthbearer.client.secret": client_secret}
    scope = opts.pop("scope", None)
    if scope:
        settings["sasl.oauthbearer.scope"] = scope
    extensions = [f"{k[len('extension_'):]}={opts.pop(k)}" for k in sorted(opts) if k.startswith("extension_")]
    if extensions:
        settings["sasl.oauthbearer.extensions"] = ",".join(extensions)
    if opts:
        raise ConfigError(f"option '{_OPTION}': OAuthBearerLoginModule option '{sorted(opts)[0]}' has no librdkafka "
                          "equivalent for OIDC (clientId, clientSecret, scope and extension_* map). Remove it")
    return settings


def jaas_settings(module: JaasModule, mechanism: str | None, *, oidc: bool) -> Tuple[Dict[str, str], str]:
    """librdkafka's settings for ``module`` and the SASL mechanism it implies.

    Parameters
    ----------
    module : JaasModule
        The login module.
    mechanism : str or None
        The ``sasl.mechanism`` the user set (upper-case), None when not set.
    oidc : bool
        Kafka's OIDC login callback handler is set (``OAuthBearerLoginModule`` then takes
        ``clientId``/``clientSecret`` for librdkafka's ``oidc`` method).

    Raises
    ------
    ConfigError
        A module librdkafka cannot use, a missing option, or a mechanism the module does not serve.
    """
    name = module.name
    if name == PLAIN:
        username, password = _need(module, "username", "password")
        return {"sasl.username": username, "sasl.password": password}, _mechanism(name, mechanism, ("PLAIN",))
    if name == SCRAM:
        if module.options.get("tokenauth", "false").lower() == "true":
            raise ConfigError(f"option '{_OPTION}': ScramLoginModule with tokenauth=true (delegation tokens) has no "
                              "librdkafka equivalent")
        username, password = _need(module, "username", "password")
        if mechanism is None:
            raise ConfigError(f"option '{_OPTION}' uses ScramLoginModule: set 'kafka.sasl.mechanism' to SCRAM-SHA-256 "
                              "or SCRAM-SHA-512 (as Spark's Kafka source needs too)")
        return ({"sasl.username": username, "sasl.password": password},
                _mechanism(name, mechanism, ("SCRAM-SHA-256", "SCRAM-SHA-512")))
    if name == OAUTHBEARER:
        settings = _oidc(module) if oidc else _unsecured_oauthbearer(module)
        return settings, _mechanism(name, mechanism, ("OAUTHBEARER",))
    if name == KERBEROS:
        settings = {}
        if module.options.get("useKeyTab", "false").lower() == "true":
            settings["sasl.kerberos.keytab"] = _need(module, "keyTab")[0]
        if module.options.get("principal"):
            settings["sasl.kerberos.principal"] = module.options["principal"]
        return settings, _mechanism(name, mechanism, ("GSSAPI",))
    if name == MSK_IAM_LOGIN:  # kafka_group.config.token_options takes MSK's options before this
        raise ConfigError(f"option '{_OPTION}' names {name}: set 'kafka.sasl.mechanism=AWS_MSK_IAM' with it")
    raise ConfigError(
        f"option '{_OPTION}' names the login module {name}, which librdkafka cannot run (it runs no Java). "
        "Supported: PlainLoginModule and ScramLoginModule (librdkafka: 'kafka.sasl.username' and "
        "'kafka.sasl.password'), OAuthBearerLoginModule (librdkafka: 'kafka.sasl.oauthbearer.config' or "
        "'kafka.sasl.oauthbearer.method=oidc') and Krb5LoginModule (librdkafka: 'kafka.sasl.kerberos.keytab')"
    )


def _mechanism(module: str, given: str | None, allowed: Tuple[str, ...]) -> str:
    if given is None:
        return allowed[0]
    if given not in allowed:
        raise ConfigError(f"option 'kafka.sasl.mechanism' is {given}, but 'kafka.sasl.jaas.config' names "
                          f"{module.rpartition('.')[2]}, which serves {' or '.join(allowed)}: make them agree")
    return given
