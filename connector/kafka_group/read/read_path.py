"""Which read path an executor uses: the compiled one (``kafka_group._native``) or confluent-kafka's.

Option ``read.path``:

* ``auto`` (the default): the compiled path when the extension imports on this platform and the
  client settings are ones it serves; else the Python path, saying why once per process
  (an INFO line; a platform without the extension is not an error).
* ``native``: the compiled path, or a :class:`~kafka_group.errors.ConfigError` naming the option.
* ``python``: always confluent-kafka (the reference implementation).

The compiled client is librdkafka built into the extension, with TLS, SASL PLAIN and SCRAM; a
token provider (``tokenProvider``: a Python callback giving OAUTHBEARER tokens, AWS MSK IAM) and
SASL mechanisms that need more (GSSAPI, OAUTHBEARER) are read by the Python path.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from types import ModuleType
from typing import Dict, Mapping, Optional, Set

from kafka_group.auth.token_provider import TOKEN_PROVIDER_KEY
from kafka_group.errors import ConfigError

__all__ = ["READ_PATHS", "READ_PATH_OPTION", "choose_native", "describe", "native_module", "unsupported_reason"]

logger = logging.getLogger(__name__)

#: The values of option ``read.path``.
READ_PATHS = ("auto", "native", "python")
READ_PATH_OPTION = "read.path"
#: The environment variable giving ``read.path``'s default (the test tiers set it).
READ_PATH_ENV = "KAFKA_GROUP_READ_PATH"
#: SASL mechanisms the compiled client serves.
_NATIVE_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})

_lock = threading.Lock()
_loaded: Optional[ModuleType] = None
_import_error: Optional[str] = None
_said: Set[str] = set()


def native_module() -> Optional[ModuleType]:
    """``kafka_group._native`` when it imports here, else None (the reason is kept for messages).

    Notes
    -----
    Caller: any thread.
    """
    global _loaded, _import_error
    with _lock:
        if _loaded is None and _import_error is None:
            try:
                _loaded = importlib.import_module("kafka_group._native")
            except ImportError as exc:
                _import_error = str(exc) or type(exc).__name__
        return _loaded


def unsupported_reason(client_config: Mapping[str, str]) -> Optional[str]:
    """Why the compiled client cannot read with these settings, or None when it can.

    Parameters
    ----------
    client_config : mapping of str to str
        The reader's librdkafka settings (as :func:`kafka_group.config.client_config.reader_config` makes them).
    """
    if TOKEN_PROVIDER_KEY in client_config:
        return "option 'tokenProvider' (a Python OAUTHBEARER token callback) is called by confluent-kafka's client only"
    protocol = str(client_config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        mechanism = str(client_config.get("sasl.mechanism") or client_config.get("sasl.mechanisms") or "GSSAPI").upper()
        if mechanism not in _NATIVE_MECHANISMS:
            return f"SASL mechanism {mechanism} ('kafka.sasl.mechanism') is served by confluent-kafka's client only"
    return None


_checked: Dict[int, Optional[str]] = {}


def _refused_setting(module: ModuleType, client_config: Mapping[str, str]) -> Optional[str]:
    """Why the compiled client's librdkafka refuses these settings (a setting newer than its version,
    say), naming the setting but not its value; None when it takes them. Checked once per process
    and settings (only a hash of them is kept)."""
    items = sorted((str(k), str(v)) for k, v in client_config.items())
    key = hash(tuple(items))
    with _lock:
        if key in _checked:
            return _checked[key]
    refused = module.check_config(items)
    reason = None if refused is None else (
        f"the librdkafka {module.librdkafka_version()} built into the compiled read path does not take "
        f"setting '{refused[0]}'")
    with _lock:
        _checked[key] = reason
    return reason


def _say_once(text: str) -> None:
    with _lock:
        if text in _said:
            return
        _said.add(text)
    logger.info("%s", text)


def choose_native(read_path: str, client_config: Mapping[str, str], *, explicit: bool = True) -> Optional[ModuleType]:
    """The extension module to read with, or None for the Python path.

    Parameters
    ----------
    read_path : str
        Option ``read.path``: ``auto``, ``native`` or ``python``.
    client_config : mapping of str to str
        The reader's librdkafka settings.
    explicit : bool
        Whether the query set ``read.path`` itself. When it did not and the value is the environment's
        default (``KAFKA_GROUP_READ_PATH=native``, the test tiers' guard against a missing module), settings
        only the Python path serves read there, as under ``auto``; a query that asks for ``native`` is
        always held to it.

    Raises
    ------
    ConfigError
        ``read.path`` is ``native`` and the compiled path is not installed, or cannot serve the settings.

    Notes
    -----
    Caller: the Spark task's thread (an executor), once per task.
    """
    if read_path == "python":
        return None
    module = native_module()
    reason = (f"the compiled read path (kafka_group._native) is not installed here ({_import_error})"
              if module is None else unsupported_reason(client_config) or _refused_setting(module, client_config))
    if reason is None:
        return module
    if read_path == "native" and not explicit and module is not None and os.environ.get(READ_PATH_ENV) == "native":
        # The test tiers' default (KAFKA_GROUP_READ_PATH=native) guards against a missing module only: a
        # query whose settings only the Python path serves reads there, as under auto.
        _say_once(f"reading with the Python read path: {reason}")
        return None
    if read_path == "native":
        raise ConfigError(
            f"option '{READ_PATH_OPTION}' is 'native' but {reason}. Install the package where a Rust toolchain "
            f"(cargo) builds it, or set '{READ_PATH_OPTION}' to 'auto' or 'python'")
    _say_once(f"reading with the Python read path: {reason}")
    return None


def describe(client_config: Mapping[str, str]) -> str:
    """One line saying which read path ``read.path=auto`` takes here with these settings, and why.

    Parameters
    ----------
    client_config : mapping of str to str
        The reader's librdkafka settings.
    """
    module = native_module()
    if module is None:
        return f"python (the compiled read path is not installed here: {_import_error})"
    reason = unsupported_reason(client_config)
    if reason is not None:
        return f"python ({reason})"
    return f"native (kafka_group._native, librdkafka {module.librdkafka_version()} built in)"
