"""Secrets are scrubbed by value from everything the connector emits: log lines, errors, ``repr``.

Masking by key name (:func:`kafka_group.config.source_options.redact_client_config`) hides a
secret where the connector shows a setting; it cannot hide the same value when it comes back
inside other text: librdkafka echoes part of a malformed ``sasl.oauthbearer.config`` in its
errors, delta-rs prints an endpoint URL with its ``user:password@``, a translated JAAS password
travels as ``sasl.password``. So every secret value the connector is given is registered here
(:func:`register_secret`, :func:`register_client_secrets`, :func:`register_storage_secrets`),
in the process that holds it (the driver when the options are parsed, an executor when it builds
a reader), and :func:`scrub` replaces each registered value, and the ``user:password@`` of any
URL, with ``***``.

:func:`scrub` is applied:

* to every log record of the ``kafka_group`` and ``pyspark_kafka_group`` loggers (and their
  children, librdkafka's log lines among them), message and traceback, by a log record factory
  installed when this module is imported (:func:`install_log_scrubbing`);
* to the message of every :class:`~kafka_group.errors.KafkaGroupError`, and to the text of the
  errors it was raised from (``__cause__``, ``__context__``) as tracebacks show them.

Values shorter than :data:`MIN_SECRET_LENGTH` characters are not scrubbed by value (they would
erase ordinary words from every line); they are still masked by key name.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections import deque
from typing import Any, Deque, FrozenSet, Iterable, List, Mapping, Optional

__all__ = [
    "MIN_SECRET_LENGTH",
    "MASK",
    "install_log_scrubbing",
    "is_secret_client_key",
    "is_secret_storage_key",
    "register_client_secrets",
    "register_rotating_secret",
    "register_secret",
    "secrets_registered",
    "register_storage_secrets",
    "scrub",
]

#: What a secret is replaced with.
MASK = "***"

#: The shortest value scrubbed by value.
MIN_SECRET_LENGTH = 6

#: Kafka client settings whose values are secrets, besides any key naming a password, secret,
#: private key or JAAS configuration (see :func:`is_secret_client_key`).
_SECRET_CLIENT_KEYS: FrozenSet[str] = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.certificate.pem",
    }
)
_SECRET_KEY_WORDS = ("password", "secret", "passphrase", "jaas")

#: delta-rs storage option names (lower-cased) whose values are secrets.
_SECRET_STORAGE_WORDS = ("key", "secret", "token", "password", "sas", "credential", "signature", "session")

#: ``scheme://user:password@``: the userinfo of a URL.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@:'\"]+:[^/\s@'\"]*@")

#: Names in ``sasl.oauthbearer.config`` whose values are not secret (the others, extensions, may be).
_OAUTHBEARER_CONFIG_PUBLIC = frozenset({"principal", "principalClaimName", "scope", "scopeClaimName", "lifeSeconds",
                                        # the AWS MSK IAM provider's (kafka_group.auth.msk_iam): no secrets
                                        "region", "profile", "roleArn", "roleSessionName"})
#: ``name=value`` of a JAAS configuration (a quoted value may hold blanks) and the names of secret ones.
_JAAS_ITEM = re.compile(r"([A-Za-z0-9_.]+)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s;]+)")
_JAAS_SECRET_NAME = re.compile(r"password|secret|token|credential|assertion|key(?!tab)", re.I)

_lock = threading.Lock()
_secrets: FrozenSet[str] = frozenset()
_pattern: Optional[re.Pattern[str]] = None

#: Rotating secrets kept for scrubbing (the newest; older ones have expired): a query refreshes its
#: OAUTHBEARER tokens for as long as it runs, and every registration recompiles the pattern.
ROTATING_KEPT = 64
_rotating: Deque[str] = deque(maxlen=ROTATING_KEPT)


def is_secret_client_key(key: str) -> bool:
    """Whether the Kafka client setting ``key`` (librdkafka or Java name, no ``kafka.`` prefix) holds a secret."""
    name = key.lower()
    return name in _SECRET_CLIENT_KEYS or any(word in name for word in _SECRET_KEY_WORDS)


def is_secret_storage_key(key: str) -> bool:
    """Whether the delta-rs storage option ``key`` holds a secret (an access key, a token, a SAS...)."""
    name = key.lower()
    return any(word in name for word in _SECRET_STORAGE_WORDS)


def register_secret(value: Optional[str]) -> None:
    """Scrub ``value`` from everything this process emits from now on.

    A multi-line value (a PEM key) is registered whole and line by line, so a part of it is
    scrubbed too; a URL's password is registered on its own.
    """
    if not value:
        return
    parts = {value.strip()}
    parts.update(line.strip() for line in value.splitlines() if not line.strip().startswith("-----"))
    for match in _URL_USERINFO.finditer(value):
        parts.add(match.group(0)[len(match.group("scheme")):-1].partition(":")[2])
    _add(p for p in parts if len(p) >= MIN_SECRET_LENGTH)


def register_rotating_secret(value: Optional[str]) -> None:
    """Scrub ``value``, a secret that is replaced over time (an OAUTHBEARER token), from now on.

    Only the newest :data:`ROTATING_KEPT` rotating secrets are kept, so a query that refreshes its
    tokens for days does not make every registration (and the pattern every log line is matched
    against) grow with them. Called from librdkafka's token refresh threads.
    """
    if not value or len(value.strip()) < MIN_SECRET_LENGTH:
        return
    with _lock:
        if value.strip() in _rotating:
            return
        _rotating.append(value.strip())
        _compile()


def secrets_registered() -> int:
    """How many values this process scrubs (for diagnostics and tests)."""
    with _lock:
        return len(_secrets | set(_rotating))


def register_client_secrets(config: Mapping[str, str]) -> None:
    """Register the secret values of Kafka client settings (by :func:`is_secret_client_key`).

    ``sasl.oauthbearer.config`` and ``sasl.jaas.config`` are registered whole and each of
    their values on its own (librdkafka echoes a part of a malformed one).
    """
    for key, value in config.items():
        if not is_secret_client_key(key):
            continue
        register_secret(value)
        if key == "sasl.oauthbearer.config":
            for token in value.split():
                name, sep, item = token.partition("=")
                if not sep:  # malformed: librdkafka's error echoes it ("Unrecognized ... beginning at: <token>")
                    register_secret(token)
                elif name not in _OAUTHBEARER_CONFIG_PUBLIC:
                    register_secret(item)
        elif key == "sasl.jaas.config":
            for name, item in _JAAS_ITEM.findall(value):
                if _JAAS_SECRET_NAME.search(name):
                    inner = item[1:-1] if item[:1] in "\"'" else item
                    register_secret(inner)
                    register_secret(re.sub(r"\\(.)", r"\1", inner))  # as the JAAS reader unescapes it


def register_storage_secrets(storage: Mapping[str, str]) -> None:
    """Register the secret values of delta-rs storage options (by :func:`is_secret_storage_key`;
    URLs among the others lose their ``user:password@`` in :func:`scrub` anyway)."""
    for key, value in storage.items():
        if is_secret_storage_key(key):
            register_secret(value)
        else:
            for match in _URL_USERINFO.finditer(value):
                register_secret(match.group(0))


def scrub(text: str) -> str:
    """``text`` with every registered secret and every URL's ``user:password@`` replaced by ``***``."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return text


def _add(values: Iterable[str]) -> None:
    global _secrets
    with _lock:
        new = _secrets.union(values)
        if new == _secrets:
            return
        _secrets = new
        _compile()


def _compile() -> None:
    """Rebuild the pattern from every registered secret (the caller holds ``_lock``)."""
    global _pattern
    # The longest first, so a secret containing another is replaced whole.
    ordered: List[str] = sorted(_secrets | set(_rotating), key=len, reverse=True)
    _pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None


# Logging.

_LOGGER_PREFIXES = ("kafka_group", "pyspark_kafka_group")
_installed = False


def _ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in _LOGGER_PREFIXES)


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: let the handler report it as logging does
        return
    record.msg, record.args = scrub(message), None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        record.exc_text = scrub("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


def install_log_scrubbing() -> None:
    """Scrub every log record of the connector's loggers (idempotent; done when this module is imported).

    A record factory rather than a logger filter: a filter on ``kafka_group`` would not see the
    records of ``kafka_group.group.membership``, which reach handlers without passing it.
    """
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _ours(record.name):
                _scrub_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


install_log_scrubbing()
