"""The one way the connector makes a Kafka client: with an error callback and, when configured, a token callback.

Every confluent-kafka client of the connector is made here (:func:`new_consumer`,
:func:`new_admin`): the driver's group member, its metadata client, the offset committer of
``assign``, event-time alignment, the executors' readers and the offsets tool. Each gets

* an ``error_cb``: the caller's own, else :func:`kafka_group.auth.access_errors.raising_error_callback`,
  so a refused login or a missing ACL is the connector's AuthenticationError or
  AuthorizationError, raised from the client's ``poll()``/``consume()``, never a bare timeout
  (a token provider's own failure first, when it is why the login failed);
* an ``oauth_cb`` (:class:`~kafka_group.auth.token_provider.TokenCallback`) when the settings carry
  :data:`~kafka_group.auth.token_provider.TOKEN_PROVIDER_KEY` (the ``tokenProvider`` option or
  the built-in AWS MSK IAM provider); the key itself never reaches librdkafka;
* a ``logger``: librdkafka's own log lines (a refused connection's ``FAIL``, a broker's
  ``REQTMOUT``...) become records of the :data:`LIBRDKAFKA_LOGGER` logger, at their syslog
  level mapped to Python's, scrubbed of secrets as every record of the connector is
  (:mod:`kafka_group.redaction`), instead of raw lines on stderr. confluent-kafka forwards them on
  the thread that calls the client's ``poll()``/``consume()``, never from librdkafka's threads.
  That logger has a ``NullHandler``: without a logging configuration (Python's, or
  ``KAFKA_GROUP_LOG_LEVEL`` in Spark's processes, :mod:`kafka_group.log_setup`) nothing is
  printed; with one, they appear at the level it lets through.

confluent-kafka 2.13 and later serve token refreshes on a background thread for every client kind
(AdminClient included) and wait, in the client's constructor, up to 10 s for the first token;
before 2.13 an AdminClient called ``oauth_cb`` only when polled. A provider that fails makes the
constructor fail: the provider's own error (naming the option) is raised instead of
librdkafka's "OAuth token not set within 10 seconds timeout".
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from kafka_group.auth.access_errors import raising_error_callback
from kafka_group.auth.token_provider import TOKEN_PROVIDER_KEY, TokenCallback

__all__ = ["LIBRDKAFKA_LOGGER", "client_settings", "librdkafka_logger", "new_admin", "new_consumer"]

#: The logger of librdkafka's own lines, for every client the connector makes.
LIBRDKAFKA_LOGGER = "kafka_group.librdkafka"
# Silent unless logging is configured: without a handler anywhere, Python's last-resort handler
# would print its warnings and errors to stderr, which is what librdkafka did itself.
logging.getLogger(LIBRDKAFKA_LOGGER).addHandler(logging.NullHandler())


def librdkafka_logger() -> logging.Logger:
    """The logger librdkafka's lines go to (:data:`LIBRDKAFKA_LOGGER`)."""
    return logging.getLogger(LIBRDKAFKA_LOGGER)

#: Codes of a login that failed for want of a token (the provider's failure explains it better).
_TOKEN_FAILURE_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})

ErrorCallback = Callable[[KafkaError], None]


def client_settings(config: Mapping[str, str], *, client: str, group: Optional[str] = None,
                    error_cb: Optional[ErrorCallback] = None) -> Tuple[Dict[str, Any], Optional[TokenCallback]]:
    """confluent-kafka settings of ``config``: the token provider's key replaced by ``oauth_cb``, and ``error_cb``.

    Parameters
    ----------
    config : mapping of str to str
        librdkafka settings, maybe with :data:`TOKEN_PROVIDER_KEY`.
    client : str
        The client's role, for the log (``driver``, ``admin``, ``reader``, ``committer``...).
    group : str, optional
        The consumer group, named in an authorization error.
    error_cb : callable, optional
        The caller's error callback; the default raises the connector's access errors.

    Returns
    -------
    tuple
        The settings and the token callback (None without a provider).

    Raises
    ------
    ConfigError
        The provider cannot be imported.
    """
    settings: Dict[str, Any] = {k: v for k, v in config.items() if k != TOKEN_PROVIDER_KEY}
    spec = config.get(TOKEN_PROVIDER_KEY)
    token_cb = TokenCallback(spec, client=client) if spec else None
    if error_cb is not None:
        # The caller's callback records errors and must not raise (it also runs inside close()):
        # a later token failure reaches it as librdkafka's authentication error (the provider logged why).
        settings["error_cb"] = error_cb
    else:
        raising = raising_error_callback(settings, group=group, client=client)

        def error_callback(error: KafkaError) -> None:
            failure = token_cb.failure if token_cb is not None else None
            if failure is not None and error.code() in _TOKEN_FAILURE_CODES:
                raise failure
            raising(error)

        settings["error_cb"] = error_callback
    if token_cb is not None:
        settings["oauth_cb"] = token_cb
    return settings, token_cb


def _made(kind: Callable[..., Any], settings: Dict[str, Any], token_cb: Optional[TokenCallback],
          **kwargs: Any) -> Any:
    try:
        return kind(settings, **kwargs)
    except KafkaException:
        failure = token_cb.failure if token_cb is not None else None
        if failure is not None:
            raise failure from None
        raise


def new_consumer(config: Mapping[str, str], *, client: str, group: Optional[str] = None,
                 error_cb: Optional[ErrorCallback] = None, logger: Optional[logging.Logger] = None,
                 **callbacks: Any) -> Consumer:
    """A ``confluent_kafka.Consumer`` of ``config`` (see :func:`client_settings`).

    Parameters
    ----------
    config, client, group, error_cb
        As :func:`client_settings`.
    logger : logging.Logger, optional
        Where librdkafka's log lines go (default :data:`LIBRDKAFKA_LOGGER`).
    **callbacks
        More confluent-kafka callbacks (``on_commit``).

    Raises
    ------
    AuthenticationError, ConfigError
        The token provider failed or cannot be imported.
    KafkaException
        librdkafka refused the settings.
    """
    settings, token_cb = client_settings(config, client=client, group=group, error_cb=error_cb)
    settings.update(callbacks)
    return _made(Consumer, settings, token_cb,  # type: ignore[no-any-return]
                 logger=logger if logger is not None else librdkafka_logger())


def new_admin(config: Mapping[str, str], *, client: str = "admin",
              error_cb: Optional[ErrorCallback] = None) -> AdminClient:
    """A ``confluent_kafka.admin.AdminClient`` of ``config`` (see :func:`new_consumer`).

    Its log lines (and error callbacks) are served by its ``poll()``: a long-lived admin client
    must be polled now and then (:class:`~kafka_group.group.cluster_metadata.ClusterView` polls
    it before each request) or they wait in its queue.
    """
    settings, token_cb = client_settings(config, client=client, error_cb=error_cb)
    return _made(AdminClient, settings, token_cb, logger=librdkafka_logger())  # type: ignore[no-any-return]
