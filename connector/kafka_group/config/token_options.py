"""Token providers chosen by options, checked and set up at ``load()``: ``tokenProvider`` and AWS MSK IAM.

* ``tokenProvider`` (``module:callable``, :mod:`kafka_group.auth.token_provider`): the user's
  OAUTHBEARER token callback. It needs SASL/OAUTHBEARER (set when ``kafka.sasl.mechanism`` is
  not) and excludes librdkafka's other token sources (unsecured tokens, ``oidc``).
* AWS MSK IAM, selected by the options MSK users give Spark: ``kafka.sasl.mechanism=AWS_MSK_IAM``
  with ``IAMLoginModule`` and ``IAMClientCallbackHandler``, or ``kafka.sasl.mechanism=OAUTHBEARER``
  with ``IAMOAuthBearerLoginCallbackHandler``. Both become SASL/OAUTHBEARER with the built-in
  provider (:mod:`kafka_group.auth.msk_iam`). The region comes from the bootstrap host
  (``*.kafka.<region>.amazonaws.com``, ``*.kafka-serverless.<region>.amazonaws.com``), else from
  ``AWS_REGION`` (then ``AWS_DEFAULT_REGION``) in the driver's environment at ``load()``;
  ``IAMLoginModule``'s ``awsProfileName``, ``awsRoleArn`` and ``awsRoleSessionName`` choose
  the credentials. The region and those travel in ``kafka.sasl.oauthbearer.config`` to every
  client, so executors need no AWS_REGION (they do need AWS credentials, as Spark's executors do).

Either sets :data:`~kafka_group.auth.token_provider.TOKEN_PROVIDER_KEY` in the client settings.
With ``kafka.security.protocol=SASL_PLAINTEXT`` the bearer tokens cross the network unencrypted:
that is accepted (development brokers use it) with a WARNING, once per process and token source,
naming the option and the fix (SASL_SSL).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from typing import Dict, Mapping, Optional, Set

from kafka_group.auth.msk_iam import MSK_IAM_EXTRA
from kafka_group.auth.token_provider import MSK_IAM_PROVIDER, TOKEN_PROVIDER_KEY, TOKEN_PROVIDER_OPTION
from kafka_group.config.jaas import MSK_IAM_LOGIN, OAUTHBEARER, module_class, parse_jaas
from kafka_group.errors import ConfigError, DependencyError

__all__ = ["MSK_CLIENT_HANDLER", "MSK_LOGIN_HANDLER", "msk_iam_selected", "msk_region", "translate_msk_iam",
           "translate_token_provider"]

MSK_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
MSK_LOGIN_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"

_MSK_HOST = re.compile(r"\.kafka(?:-serverless)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?::\d+)?$",
                       re.IGNORECASE)
#: IAMLoginModule's options and their names in the provider's config (None: accepted, not needed).
_MSK_JAAS_OPTIONS: Dict[str, Optional[str]] = {"awsProfileName": "profile", "awsRoleArn": "roleArn",
                                               "awsRoleSessionName": "roleSessionName", "awsDebugCreds": None}
#: The token sources already warned about in this process (see :func:`_warn_if_clear_text`).
_WARNED: Set[str] = set()
_log = logging.getLogger(__name__)
_OTHER_TOKEN_SOURCES = ("sasl.oauthbearer.method", "enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.config",
                        "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret")


def _mechanism_key(config: Mapping[str, str]) -> str:
    return "sasl.mechanisms" if "sasl.mechanisms" in config else "sasl.mechanism"


def msk_iam_selected(config: Mapping[str, str]) -> bool:
    """Whether the options select AWS MSK IAM (the mechanism, MSK's login module or one of its handler classes)."""
    mechanism = config.get(_mechanism_key(config), "").strip().upper()
    handlers = {module_class(config.get(key, "").strip())
                for key in ("sasl.login.callback.handler.class", "sasl.client.callback.handler.class")}
    jaas = config.get("sasl.jaas.config", "")
    return (mechanism == "AWS_MSK_IAM" or bool(handlers & {MSK_CLIENT_HANDLER, MSK_LOGIN_HANDLER})
            or MSK_IAM_LOGIN in jaas)


def msk_region(servers: str, environ: Mapping[str, str]) -> str:
    """The AWS region of an MSK cluster: from its bootstrap host, else ``AWS_REGION``/``AWS_DEFAULT_REGION``.

    Raises
    ------
    ConfigError
        Neither gives one.
    """
    for server in servers.split(","):
        found = _MSK_HOST.search(server.strip())
        if found:
            return found.group("region").lower()
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if environ.get(name, "").strip():
            return environ[name].strip()
    raise ConfigError("AWS MSK IAM needs the cluster's region: the bootstrap host is not an MSK one "
                      "(*.kafka.<region>.amazonaws.com) and neither AWS_REGION nor AWS_DEFAULT_REGION is set on the "
                      "driver. Set AWS_REGION")


def translate_msk_iam(config: Dict[str, str], token_provider: Optional[str],
                      environ: Optional[Mapping[str, str]] = None) -> None:
    """Turn MSK's IAM options in ``config`` into SASL/OAUTHBEARER with the built-in provider (in place).

    Raises
    ------
    DependencyError
        The ``msk-iam`` extra is not installed.
    ConfigError
        The options disagree (another login module or mechanism, a ``tokenProvider`` too, an
        IAMLoginModule option the provider does not have), or no region.
    """
    key = _mechanism_key(config)
    mechanism = config.get(key, "").strip().upper()
    if token_provider is not None:
        raise ConfigError(f"option '{TOKEN_PROVIDER_OPTION}' and AWS MSK IAM ('kafka.{key}', its login module or "
                          "callback handler) both give the OAUTHBEARER token: keep one")
    if mechanism not in ("AWS_MSK_IAM", "OAUTHBEARER"):
        raise ConfigError(f"option 'kafka.{key}' is {mechanism or 'not set'}, but the options name AWS MSK IAM's "
                          "login module or callback handler: set 'kafka.sasl.mechanism' to AWS_MSK_IAM (with "
                          "IAMLoginModule) or OAUTHBEARER (with IAMOAuthBearerLoginCallbackHandler)")
    for handler_key in ("sasl.login.callback.handler.class", "sasl.client.callback.handler.class"):
        handler = module_class(config.pop(handler_key, "").strip())
        if handler and handler not in (MSK_CLIENT_HANDLER, MSK_LOGIN_HANDLER):
            raise ConfigError(f"option 'kafka.{handler_key}' names {handler} with AWS MSK IAM: use "
                              f"{MSK_CLIENT_HANDLER} or {MSK_LOGIN_HANDLER}, or remove it")
    provider_config: Dict[str, str] = {}
    jaas = config.pop("sasl.jaas.config", "").strip()
    if jaas:
        module = parse_jaas(jaas)
        if module.name not in (MSK_IAM_LOGIN, OAUTHBEARER):
            raise ConfigError(f"option 'kafka.sasl.jaas.config' names {module.name} with AWS MSK IAM: use "
                              f"{MSK_IAM_LOGIN} (or {OAUTHBEARER} with IAMOAuthBearerLoginCallbackHandler)")
        for name, value in module.options.items():
            if name not in _MSK_JAAS_OPTIONS:
                raise ConfigError(f"option 'kafka.sasl.jaas.config': {module.name.rpartition('.')[2]} option "
                                  f"'{name}' is not supported by the built-in MSK IAM provider (it takes "
                                  f"{', '.join(_MSK_JAAS_OPTIONS)}). Remove it")
            target = _MSK_JAAS_OPTIONS[name]
            if target is not None and value:
                if any(c.isspace() for c in value):
                    raise ConfigError(f"option 'kafka.sasl.jaas.config': '{name}' holds a blank")
                provider_config[target] = value
    for other in _OTHER_TOKEN_SOURCES:
        if other in config:
            raise ConfigError(f"options 'kafka.{other}' and AWS MSK IAM both configure the OAUTHBEARER token: "
                              f"remove 'kafka.{other}'")
    if importlib.util.find_spec("aws_msk_iam_sasl_signer") is None:
        raise DependencyError("AWS MSK IAM authentication needs AWS's signer package "
                              f"(aws-msk-iam-sasl-signer-python): {MSK_IAM_EXTRA}, on the driver and the executors")
    region = msk_region(config.get("bootstrap.servers", ""), os.environ if environ is None else environ)
    config.pop("sasl.mechanisms", None)
    config["sasl.mechanism"] = "OAUTHBEARER"
    config["sasl.oauthbearer.config"] = " ".join(f"{k}={v}" for k, v in {"region": region, **provider_config}.items())
    config[TOKEN_PROVIDER_KEY] = MSK_IAM_PROVIDER
    _warn_if_clear_text(config, f"AWS MSK IAM ('kafka.{key}', its login module or callback handler)")


def translate_token_provider(config: Dict[str, str], spec: str) -> None:
    """Set up SASL/OAUTHBEARER with the user's provider ``spec`` (in place).

    An ``OAuthBearerLoginModule`` JAAS configuration without options (what Java clients with a
    custom login callback handler give) is dropped.

    Raises
    ------
    ConfigError
        Another mechanism, another token source, or a Java login callback handler too.
    """
    key = _mechanism_key(config)
    mechanism = config.get(key, "").strip().upper()
    if mechanism and mechanism != "OAUTHBEARER":
        raise ConfigError(f"option '{TOKEN_PROVIDER_OPTION}' gives OAUTHBEARER tokens, but 'kafka.{key}' is "
                          f"{mechanism}: set it to OAUTHBEARER (or leave it unset)")
    if config.get("sasl.login.callback.handler.class", "").strip():
        raise ConfigError(f"options '{TOKEN_PROVIDER_OPTION}' and 'kafka.sasl.login.callback.handler.class' both "
                          "give the OAUTHBEARER token: keep the first (librdkafka runs no Java handler)")
    for other in ("sasl.oauthbearer.method", "enable.sasl.oauthbearer.unsecure.jwt"):
        value = config.get(other, "").strip().lower()
        if value in ("oidc", "true"):
            raise ConfigError(f"options '{TOKEN_PROVIDER_OPTION}' and 'kafka.{other}={value}' both give the "
                              f"OAUTHBEARER token: keep one")
    jaas = config.get("sasl.jaas.config", "").strip()
    if jaas:
        module = parse_jaas(jaas)
        if module.name != OAUTHBEARER or module.options:
            raise ConfigError(f"options '{TOKEN_PROVIDER_OPTION}' and 'kafka.sasl.jaas.config' both configure the "
                              f"login: remove 'kafka.sasl.jaas.config' (or leave only '{OAUTHBEARER} required;')")
        del config["sasl.jaas.config"]
    config.pop("sasl.mechanisms", None)
    config["sasl.mechanism"] = "OAUTHBEARER"
    config[TOKEN_PROVIDER_KEY] = spec
    _warn_if_clear_text(config, f"option '{TOKEN_PROVIDER_OPTION}'")


def _warn_if_clear_text(config: Mapping[str, str], source: str) -> None:
    """Warn, once per process and ``source``, that SASL_PLAINTEXT sends the bearer tokens unencrypted."""
    if config.get("security.protocol", "").strip().upper() != "SASL_PLAINTEXT" or source in _WARNED:
        return
    _WARNED.add(source)
    _log.warning("%s gives OAUTHBEARER tokens, and 'kafka.security.protocol' is SASL_PLAINTEXT: each token crosses "
                 "the network unencrypted, readable and reusable by anyone on the path until it expires. "
                 "Outside a development broker, set 'kafka.security.protocol' to SASL_SSL", source)
