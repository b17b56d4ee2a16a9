"""The built-in AWS MSK IAM token provider: AWS's own signer (``aws-msk-iam-sasl-signer-python``).

MSK's IAM access control accepts, over SASL/OAUTHBEARER, a token that is the base64url of a
SigV4-presigned ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&...``
URL, signed with the caller's AWS credentials (the default chain: environment, profile,
instance or container role; or a named profile; or a role to assume). :func:`msk_iam_token`
makes one with AWS's package, installed by the ``msk-iam`` extra
(``pip install 'pyspark-kafka-group[msk-iam]'``).

It is selected at ``load()`` by the options MSK users give Spark
(:mod:`kafka_group.config.token_options`), which put the region and the credentials' source
into ``kafka.sasl.oauthbearer.config`` (``region=us-east-1 profile=... roleArn=...
roleSessionName=...``): librdkafka hands that string to the provider.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from kafka_group.errors import ConfigError, DependencyError

__all__ = ["MSK_IAM_EXTRA", "msk_iam_token", "parse_provider_config", "signer"]

#: The extra that installs AWS's signer.
MSK_IAM_EXTRA = "pip install 'pyspark-kafka-group[msk-iam]'"

_SIGNER_MODULE = "aws_msk_iam_sasl_signer"


def signer() -> Any:
    """AWS's ``MSKAuthTokenProvider`` module.

    Raises
    ------
    DependencyError
        ``aws-msk-iam-sasl-signer-python`` is not installed (the ``msk-iam`` extra).
    """
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as exc:
        raise DependencyError(f"AWS MSK IAM authentication needs AWS's signer package "
                              f"(aws-msk-iam-sasl-signer-python): {MSK_IAM_EXTRA}, on the driver and the "
                              f"executors ({exc})") from exc
    return MSKAuthTokenProvider


def parse_provider_config(text: str) -> Dict[str, str]:
    """The ``name=value`` pairs (separated by blanks) of ``kafka.sasl.oauthbearer.config``."""
    settings: Dict[str, str] = {}
    for item in text.split():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError("option 'kafka.sasl.oauthbearer.config' of AWS MSK IAM must be 'name=value' pairs "
                              "separated by blanks (region=..., profile=..., roleArn=..., roleSessionName=...)")
        settings[name] = value
    return settings


def msk_iam_token(oauthbearer_config: str) -> Tuple[str, float]:
    """An MSK IAM token and its expiry (seconds since the epoch): confluent-kafka's ``oauth_cb``.

    Parameters
    ----------
    oauthbearer_config : str
        ``region=<region>`` and optionally ``profile=<name>`` or ``roleArn=<arn>``
        (with ``roleSessionName=<name>``).

    Raises
    ------
    DependencyError
        AWS's signer is not installed.
    ConfigError
        No region.
    """
    settings = parse_provider_config(oauthbearer_config)
    region = settings.get("region")
    if not region:
        raise ConfigError("AWS MSK IAM needs the cluster's region: 'region=<region>' in "
                          "'kafka.sasl.oauthbearer.config' (set at load() from the bootstrap host or AWS_REGION)")
    provider = signer()
    if settings.get("profile"):
        token, expiry_ms = provider.generate_auth_token_from_profile(region, settings["profile"])
    elif settings.get("roleArn"):
        token, expiry_ms = provider.generate_auth_token_from_role_arn(
            region, settings["roleArn"], settings.get("roleSessionName") or "MSKSASLDefaultSession")
    else:
        token, expiry_ms = provider.generate_auth_token(region)
    return str(token), float(expiry_ms) / 1000.0
