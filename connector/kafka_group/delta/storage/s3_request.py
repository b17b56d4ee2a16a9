"""S3 requests of the conditional-put probe, through boto3 and the standard AWS credential chain.

delta-rs exposes no conditional put to Python, and every commit it makes checks the latest table
version first, so two sequential delta-rs commits never reach the store with the same version:
the probe (:mod:`kafka_group.delta.storage.conditional_put`) sends its two ``If-None-Match: *`` PUTs itself,
with boto3 (the ``s3`` extra: ``pip install 'pyspark-kafka-group[s3]'``).

It reaches the store the way delta-rs does with the same storage options (keys matched
case-insensitively, then the environment): ``AWS_ENDPOINT_URL``, ``AWS_REGION``, path-style unless
``AWS_VIRTUAL_HOSTED_STYLE_REQUEST`` is true. Credentials: static ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` in the storage options first, else a profile named by
the ``AWS_PROFILE`` option, else boto3's standard chain, which is what clusters use: environment
variables, the shared credentials and config files (``AWS_PROFILE``, ``AWS_SHARED_CREDENTIALS_FILE``,
``AWS_CONFIG_FILE``; assume-role, SSO and ``credential_process`` profiles), web identity (EKS IRSA:
``AWS_WEB_IDENTITY_TOKEN_FILE`` + ``AWS_ROLE_ARN``), container credentials (ECS, EKS Pod Identity) and
the instance profile (EC2 instance metadata). When the chain finds nothing, :func:`s3_target` returns
None. Nothing here logs or returns a credential; a :class:`S3Target` prints its endpoint only.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from kafka_group.errors import DependencyError

__all__ = ["ENDPOINT", "S3Target", "S3Unreachable", "s3_create", "s3_delete", "s3_target"]

_ACCESS_KEY = ("aws_access_key_id", "access_key_id")
_SECRET_KEY = ("aws_secret_access_key", "secret_access_key")
_TOKEN = ("aws_session_token", "aws_token", "session_token", "token")
_PROFILE = ("aws_profile", "profile")
_REGION = ("aws_region", "region", "aws_default_region", "default_region")
#: The storage option names of the endpoint (delta-rs's spellings).
ENDPOINT = ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
_VIRTUAL_HOSTED = ("aws_virtual_hosted_style_request", "virtual_hosted_style_request")
#: The environment variables delta-rs reads for the options that are not credentials (boto3's own chain
#: reads the credential ones, AWS_PROFILE among them).
_ENV = {
    _REGION: ("AWS_REGION", "AWS_DEFAULT_REGION"), ENDPOINT: ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
    _VIRTUAL_HOSTED: ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",),
}
#: The oldest boto3 whose PutObject takes IfNoneMatch (botocore 1.35.2, August 2024).
BOTO3_REQUIREMENT = "boto3>=1.35.2"


class S3Unreachable(OSError):
    """A request could not be sent or answered (no route, timeout, the credential chain failed); the
    message is the botocore error's class name only."""


class S3Target(NamedTuple):
    """One bucket and a boto3 S3 client for it (never printed with credentials: ``repr`` shows the endpoint)."""

    bucket: str
    """The bucket name."""
    endpoint: str
    """``scheme://host[:port]`` of the store, fit for an error message (no path, no credentials)."""
    client: Any
    """A ``botocore`` S3 client; it holds the credentials the chain found."""

    def __repr__(self) -> str:  # never the client, whose credentials boto3 keeps
        return f"S3Target({self.bucket!r}, endpoint={self.endpoint!r})"


def option(options: Mapping[str, str], names: Sequence[str]) -> Optional[str]:
    """A storage option by any of its ``names`` (matched case-insensitively), else the environment."""
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        if lowered.get(name):
            return lowered[name]
    for env in _ENV.get(tuple(names), ()):
        if os.environ.get(env):
            return os.environ[env]
    return None


def _boto3() -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise DependencyError(
            "the conditional-put probe of an s3:// table sends its requests with boto3, which is not installed "
            f"here: pip install 'pyspark-kafka-group[s3]' (or '{BOTO3_REQUIREMENT}'). To commit without the probe, "
            "declare exactly one writer with the storage option AWS_S3_ALLOW_UNSAFE_RENAME=true"
        ) from exc
    return boto3, Config


def s3_target(bucket: str, options: Mapping[str, str]) -> Optional[S3Target]:
    """How to reach ``bucket`` with ``options`` (delta-rs storage options); None when no credentials are found.

    Raises
    ------
    DependencyError
        boto3 is not installed.
    S3Unreachable
        The credential chain failed (a named profile that does not exist, a broken credentials file).
    """
    boto3, config_class = _boto3()
    from botocore.exceptions import BotoCoreError

    access_key, secret_key = option(options, _ACCESS_KEY), option(options, _SECRET_KEY)
    try:
        if access_key and secret_key:
            session = boto3.Session(aws_access_key_id=access_key, aws_secret_access_key=secret_key,
                                    aws_session_token=option(options, _TOKEN))
        else:
            session = boto3.Session(profile_name=option(options, _PROFILE))
        if session.get_credentials() is None:
            return None
    except BotoCoreError as exc:  # a profile that does not exist, a half-written credentials file, ...
        raise S3Unreachable(type(exc).__name__) from None
    region = option(options, _REGION) or session.region_name or "us-east-1"
    endpoint = option(options, ENDPOINT)
    virtual = (option(options, _VIRTUAL_HOSTED) or "").strip().lower() in ("1", "true", "yes", "on")
    if virtual and endpoint:
        # as object_store: a virtual-hosted endpoint already names the bucket; boto3 adds it itself
        parts = urllib.parse.urlsplit(endpoint)
        host = parts.netloc
        if host.startswith(f"{bucket}."):
            endpoint = urllib.parse.urlunsplit((parts.scheme, host[len(bucket) + 1:], "", "", ""))
    config = config_class(region_name=region, connect_timeout=10, read_timeout=30,
                          retries={"max_attempts": 3, "mode": "standard"},
                          s3={"addressing_style": "virtual" if virtual else "path"})
    client = session.client("s3", endpoint_url=endpoint.rstrip("/") if endpoint else None, config=config)
    parts = urllib.parse.urlsplit(client.meta.endpoint_url)
    where = f"{parts.scheme}://{parts.hostname}{'' if parts.port is None else f':{parts.port}'}"
    return S3Target(bucket, where, client)


def s3_create(target: S3Target, key: str, body: bytes) -> int:
    """PUT ``body`` at ``key`` (relative to the bucket) with ``If-None-Match: *``: create it only if absent.

    Returns
    -------
    int
        The HTTP status of the answer (an error status, 412 for an existing object, is returned, not raised).

    Raises
    ------
    S3Unreachable
        The store could not be reached, or the credential chain failed.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = target.client.put_object(Bucket=target.bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as exc:
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    except BotoCoreError as exc:
        raise S3Unreachable(type(exc).__name__) from None  # the cause may quote a credential source's text
    return int(answer["ResponseMetadata"]["HTTPStatusCode"])


def s3_delete(target: S3Target, key: str) -> None:
    """Delete ``key`` (relative to the bucket).

    Raises
    ------
    S3Unreachable
        The store could not be reached or refused the request.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        target.client.delete_object(Bucket=target.bucket, Key=key)
    except (BotoCoreError, ClientError) as exc:
        raise S3Unreachable(type(exc).__name__) from None
