"""The ``tokenProvider`` hook and the built-in AWS MSK IAM provider, without a broker (issue 28 item 2).

What reaches a real broker is tests/integration/test_secured_kafka.py's.
"""

from __future__ import annotations

import base64
import time
import urllib.parse
from typing import Any, Dict, Tuple

import pytest
from confluent_kafka import KafkaError

from kafka_group.auth.clients import client_settings
from kafka_group.auth.msk_iam import msk_iam_token
from kafka_group.auth.token_provider import MSK_IAM_PROVIDER, TOKEN_PROVIDER_KEY, TokenCallback
from kafka_group.config.options import parse_source_options
from kafka_group.config.token_options import msk_region
from kafka_group.errors import AuthenticationError, ConfigError, DependencyError
from kafka_group.redaction import scrub

HERE = "tests.unit.test_token_provider"
_MSK_HOST = "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"


def good_token(config: str) -> Tuple[str, float, str, Dict[str, str]]:
    return "tok-" + "x" * 20, time.time() + 600, "alice", {"traceId": "trace-secret-1"}


def raising_token(config: str) -> Tuple[str, float]:
    raise RuntimeError("identity provider down")


def millisecond_token(config: str) -> Tuple[str, float]:
    return "tok-abcdefgh", time.time() * 1000 + 600_000


def expired_token(config: str) -> Tuple[str, float]:
    return "tok-abcdefgh", time.time() - 5


def string_token(config: str) -> str:
    return "just-a-token"


class TokenClass:
    def __call__(self, config: str) -> Tuple[str, int]:
        return "class-token-abc", int(time.time()) + 60


def options(**more: str) -> Dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "kafka.group.id": "g", **more}


def test_token_provider_option_sets_oauthbearer_and_travels_in_the_client_settings() -> None:
    parsed = parse_source_options(options(tokenProvider=f"{HERE}:good_token", **{"kafka.security.protocol": "SASL_SSL"}))
    assert parsed.client_config["sasl.mechanism"] == "OAUTHBEARER"
    assert parsed.client_config[TOKEN_PROVIDER_KEY] == f"{HERE}:good_token"
    settings, token_cb = client_settings(parsed.client_config, client="reader")
    assert TOKEN_PROVIDER_KEY not in settings and settings["oauth_cb"] is token_cb and callable(settings["error_cb"])
    token, expiry, principal, extensions = token_cb("")  # type: ignore[misc]
    assert (token, principal, extensions) == ("tok-" + "x" * 20, "alice", {"traceId": "trace-secret-1"})
    assert expiry > time.time()
    # The token and the extensions are secrets from now on.
    assert scrub(f"token {token} trace trace-secret-1") == "token *** trace ***"


def test_a_class_is_instantiated_and_an_int_expiry_accepted() -> None:
    token = TokenCallback(f"{HERE}:TokenClass", client="driver")("")
    assert token[0] == "class-token-abc" and isinstance(token[1], float)


@pytest.mark.parametrize("spec, error, message", [
    (f"{HERE}:raising_token", AuthenticationError, "raised RuntimeError: identity provider down"),
    (f"{HERE}:millisecond_token", ConfigError, "returned an expiry in milliseconds"),
    (f"{HERE}:expired_token", AuthenticationError, "returned a token that expired"),
    (f"{HERE}:string_token", ConfigError, "returned a str: return a tuple (token, expiry"),
])
def test_a_provider_that_fails_names_the_option(spec: str, error: type, message: str) -> None:
    callback = TokenCallback(spec, client="reader")
    with pytest.raises(error) as failed:
        callback("")
    assert f"option 'tokenProvider' ({spec})" in str(failed.value) and message in str(failed.value)
    assert callback.failure is failed.value


def test_the_error_callback_raises_the_providers_failure_not_librdkafkas() -> None:
    settings, token_cb = client_settings({"bootstrap.servers": "x:1", TOKEN_PROVIDER_KEY: f"{HERE}:raising_token"},
                                         client="reader")
    with pytest.raises(AuthenticationError):
        token_cb("")  # type: ignore[misc]
    with pytest.raises(AuthenticationError, match="option 'tokenProvider'"):
        settings["error_cb"](KafkaError(KafkaError._AUTHENTICATION, "Failed to acquire SASL OAUTHBEARER token"))


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:token", "cannot import module 'no_such_module_xyz'"),
    (f"{HERE}:no_such_callable", "has no callable named 'no_such_callable'"),
])
def test_a_provider_that_cannot_be_loaded_fails_when_the_client_is_made(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        client_settings({"bootstrap.servers": "x:1", TOKEN_PROVIDER_KEY: spec}, client="driver")


@pytest.mark.parametrize("more, message", [
    ({"tokenProvider": "not a spec"}, "option 'tokenProvider' must name a callable"),
    ({"tokenProvider": f"{HERE}:good_token", "kafka.sasl.mechanism": "PLAIN"}, "'kafka.sasl.mechanism' is PLAIN"),
    ({"tokenProvider": f"{HERE}:good_token", "kafka.sasl.oauthbearer.method": "oidc"}, "both give the OAUTHBEARER"),
    ({"tokenProvider": f"{HERE}:good_token", "kafka.enable.sasl.oauthbearer.unsecure.jwt": "true"}, "both give"),
])
def test_token_provider_conflicts_fail_at_load(more: Dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options(options(**more))


_IAM_LOGIN = "software.amazon.msk.auth.iam.IAMLoginModule"


@pytest.mark.parametrize("msk_options", [
    {"kafka.sasl.mechanism": "AWS_MSK_IAM", "kafka.sasl.jaas.config": f"{_IAM_LOGIN} required;",
     "kafka.sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"},
    {"kafka.sasl.mechanism": "OAUTHBEARER",
     "kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
     "kafka.sasl.login.callback.handler.class":
         "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"},
], ids=["AWS_MSK_IAM", "OAUTHBEARER"])
def test_msk_iam_options_select_the_built_in_provider(msk_options: Dict[str, str]) -> None:
    parsed = parse_source_options({**options(**msk_options), "kafka.bootstrap.servers": _MSK_HOST,
                                   "kafka.security.protocol": "SASL_SSL"})
    config = parsed.client_config
    assert {k: config[k] for k in ("sasl.mechanism", "sasl.oauthbearer.config", TOKEN_PROVIDER_KEY)} == {
        "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "region=eu-west-1",
        TOKEN_PROVIDER_KEY: MSK_IAM_PROVIDER}
    assert not any(k.endswith("callback.handler.class") or k == "sasl.jaas.config" for k in config)


def test_msk_iam_login_module_options_choose_the_credentials() -> None:
    parsed = parse_source_options({**options(), "kafka.bootstrap.servers": _MSK_HOST,
                                   "kafka.sasl.mechanism": "AWS_MSK_IAM", "kafka.sasl.jaas.config":
                                   f'{_IAM_LOGIN} required awsRoleArn="arn:aws:iam::123456789012:role/reader" '
                                   'awsRoleSessionName="spark" awsDebugCreds=true;'})
    assert parsed.client_config["sasl.oauthbearer.config"] == (
        "region=eu-west-1 roleArn=arn:aws:iam::123456789012:role/reader roleSessionName=spark")


def test_msk_region_from_the_host_else_aws_region() -> None:
    assert msk_region("boot-abc.c1.kafka-serverless.us-east-2.amazonaws.com:9098", {}) == "us-east-2"
    assert msk_region("127.0.0.1:9092", {"AWS_REGION": "ap-south-1"}) == "ap-south-1"
    assert msk_region("127.0.0.1:9092", {"AWS_DEFAULT_REGION": "eu-north-1"}) == "eu-north-1"
    with pytest.raises(ConfigError, match="Set AWS_REGION"):
        msk_region("127.0.0.1:9092", {})


def test_msk_iam_without_the_extra_is_a_dependency_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "aws_msk_iam_sasl_signer" else real(name, *a))
    with pytest.raises(DependencyError, match=r"pyspark-kafka-group\[msk-iam\]"):
        parse_source_options({**options(), "kafka.bootstrap.servers": _MSK_HOST, "kafka.sasl.mechanism": "AWS_MSK_IAM"})


def test_msk_iam_token_is_a_signed_kafka_connect_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS's signer with fake credentials (its signature cannot be checked here: only its form)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key-for-tests")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    token, expiry = msk_iam_token("region=eu-west-1")
    url = urllib.parse.urlparse(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query: Dict[str, Any] = urllib.parse.parse_qs(url.query)
    assert (url.scheme, url.netloc) == ("https", "kafka.eu-west-1.amazonaws.com")
    assert query["Action"] == ["kafka-cluster:Connect"] and query["X-Amz-Signature"]
    assert query["X-Amz-Credential"][0].startswith("AKIAFAKEFORTESTS0001/")
    assert time.time() < expiry < time.time() + 3600


def test_the_msk_region_is_not_scrubbed_from_messages() -> None:
    parse_source_options({**options(), "kafka.bootstrap.servers": _MSK_HOST, "kafka.sasl.mechanism": "AWS_MSK_IAM"})
    assert scrub(f"could not reach {_MSK_HOST}") == f"could not reach {_MSK_HOST}"


_refreshes = iter(range(10**9))


def rotating_token(config: str) -> Tuple[str, float]:
    """A new token at every call, as an identity provider's refresh gives."""
    return f"rotating-token-{next(_refreshes):08d}-" + "y" * 40, time.time() + 600


def test_token_refreshes_do_not_grow_what_every_log_line_is_scrubbed_against() -> None:
    """A long-running query refreshes its tokens forever (MSK IAM: every ~15 min, per client): the tokens kept
    for scrubbing are the recent ones, so each refresh costs the same after a day as after a minute; the
    newest token is still scrubbed."""
    import kafka_group.redaction as redaction

    callback = TokenCallback(f"{HERE}:rotating_token", client="driver")
    before = redaction.secrets_registered()
    tokens = [callback("")[0] for _ in range(300)]
    assert redaction.secrets_registered() - before <= 64
    assert scrub(f"log line with {tokens[-1]}") == "log line with ***"
