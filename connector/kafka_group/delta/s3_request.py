"""One signed S3 request (AWS Signature Version 4), for the conditional-put probe.

delta-rs exposes no conditional put to Python, and every commit it makes checks the latest table
version first, so two sequential delta-rs commits never reach the store with the same version:
the probe (:mod:`kafka_group.delta.conditional_put`) sends its two ``If-None-Match: *`` PUTs itself.
It reaches the store the way delta-rs does with the same storage options (``AWS_ENDPOINT_URL``,
``AWS_REGION``, static ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
from the options first, then the environment, keys matched case-insensitively), path-style unless
``AWS_VIRTUAL_HOSTED_STYLE_REQUEST`` is true. Credentials delta-rs finds elsewhere (profiles,
instance or web-identity credentials) are not looked for: :func:`s3_target` then returns None.
Nothing here logs or returns a credential.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Mapping, NamedTuple, Optional, Sequence

__all__ = ["S3Target", "s3_put", "s3_target", "sigv4_headers"]

_ACCESS_KEY = ("aws_access_key_id", "access_key_id")
_SECRET_KEY = ("aws_secret_access_key", "secret_access_key")
_TOKEN = ("aws_session_token", "aws_token", "session_token", "token")
_REGION = ("aws_region", "region", "aws_default_region", "default_region")
_ENDPOINT = ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
_VIRTUAL_HOSTED = ("aws_virtual_hosted_style_request", "virtual_hosted_style_request")
_ENV = {
    _ACCESS_KEY: ("AWS_ACCESS_KEY_ID",), _SECRET_KEY: ("AWS_SECRET_ACCESS_KEY",), _TOKEN: ("AWS_SESSION_TOKEN",),
    _REGION: ("AWS_REGION", "AWS_DEFAULT_REGION"), _ENDPOINT: ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
    _VIRTUAL_HOSTED: ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",),
}


class S3Target(NamedTuple):
    """Where and as whom to send requests for one bucket (never printed: it holds credentials)."""

    base_url: str
    """``scheme://host[:port][/bucket]``: object keys are appended after a ``/``."""
    region: str
    """The signing region."""
    access_key: str
    """The access key id."""
    secret_key: str
    """The secret access key."""
    token: Optional[str]
    """The session token of temporary credentials, if any."""

    def __repr__(self) -> str:  # never the credentials
        return f"S3Target({self.base_url!r}, region={self.region!r})"

    @property
    def endpoint(self) -> str:
        """The endpoint, fit for an error message (``scheme://host[:port]``, no path, no credentials)."""
        parts = urllib.parse.urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.hostname}{'' if parts.port is None else f':{parts.port}'}"


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


def s3_target(bucket: str, options: Mapping[str, str]) -> Optional[S3Target]:
    """How to reach ``bucket`` with ``options`` (delta-rs storage options); None without static credentials."""
    access_key, secret_key = option(options, _ACCESS_KEY), option(options, _SECRET_KEY)
    if not access_key or not secret_key:
        return None
    region = option(options, _REGION) or "us-east-1"
    endpoint = (option(options, _ENDPOINT) or f"https://s3.{region}.amazonaws.com").rstrip("/")
    virtual = (option(options, _VIRTUAL_HOSTED) or "").strip().lower() in ("1", "true", "yes", "on")
    if virtual and option(options, _ENDPOINT) is None:
        base = f"https://{bucket}.s3.{region}.amazonaws.com"
    elif virtual:
        base = endpoint  # as object_store: a virtual-hosted endpoint already names the bucket
    else:
        base = f"{endpoint}/{urllib.parse.quote(bucket, safe='')}"
    return S3Target(base, region, access_key, secret_key, option(options, _TOKEN))


def sigv4_headers(
    method: str, url: str, headers: Mapping[str, str], payload_hash: str, *, region: str, access_key: str,
    secret_key: str, now: datetime.datetime, service: str = "s3",
) -> Dict[str, str]:
    """``headers`` plus ``x-amz-date`` and the ``Authorization`` of AWS Signature Version 4.

    Every header given is signed (with ``host``, taken from ``url``); ``url``'s path must already be
    URI-encoded as S3 wants it, and ``headers`` must hold ``x-amz-content-sha256`` for S3.
    """
    parts = urllib.parse.urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed.setdefault("host", parts.netloc)
    signed["x-amz-date"] = amz_date
    names = sorted(signed)
    query = "&".join(sorted(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)))
    canonical = "\n".join([
        method, parts.path or "/", query, "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names), payload_hash,
    ])
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    result = {k: v for k, v in headers.items()}
    result["x-amz-date"] = amz_date
    result["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
                               f"Signature={signature}")
    return result


def s3_put(target: S3Target, key: str, body: bytes, headers: Mapping[str, str], *, timeout_s: float = 30) -> int:
    """PUT ``body`` at ``key`` (relative to the bucket, not encoded) with extra ``headers``, signed.

    Returns
    -------
    int
        The HTTP status of the answer (an error status is returned, not raised).

    Raises
    ------
    OSError
        The store could not be reached (``urllib.error.URLError`` and the like).
    """
    url = f"{target.base_url}/{urllib.parse.quote(key, safe='/-_.~')}"
    payload_hash = hashlib.sha256(body).hexdigest()
    extra = {**headers, "x-amz-content-sha256": payload_hash}
    if target.token:
        extra["x-amz-security-token"] = target.token
    signed = sigv4_headers("PUT", url, extra, payload_hash, region=target.region, access_key=target.access_key,
                           secret_key=target.secret_key, now=datetime.datetime.now(datetime.timezone.utc))
    request = urllib.request.Request(url, data=body, method="PUT", headers=signed)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)
