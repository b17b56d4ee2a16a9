"""Options that name user code as ``package.module:callable`` (``rebalanceListener``, ``tokenProvider``).

The form is checked when the options are parsed (no import); the import happens where the code
runs (:func:`load_callable`): a listener on the driver, a token provider in every process that
makes a Kafka client. A class is called with no arguments to make the callable.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any, Callable

from kafka_group.errors import ConfigError, KafkaGroupError

__all__ = ["CALLABLE_SPEC", "check_callable_spec", "load_callable"]

#: ``module.path:attribute`` with Python identifiers.
CALLABLE_SPEC = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


def check_callable_spec(option: str, raw: str) -> str:
    """Check the form of ``raw`` (no import); return it stripped.

    Raises
    ------
    ConfigError
        ``raw`` is not ``package.module:callable``, naming ``option``.
    """
    text = raw.strip()
    if not CALLABLE_SPEC.match(text):
        raise ConfigError(f"option '{option}' must name a callable as 'package.module:function', got '{raw}'")
    return text


def load_callable(spec: str, *, option: str, origin: str, where: str, install: str,
                  signature: str) -> Callable[..., Any]:
    """Import the callable ``spec`` names, in the calling process.

    Parameters
    ----------
    spec : str
        ``"package.module:function"`` or ``"package.module:Class"``.
    option : str
        The option whose form is checked (named by a malformed spec's error).
    origin : str
        How the other errors name what selected the code (e.g. ``"option 'rebalanceListener'"``).
    where : str
        Where the import runs, as the import error says it (``" on the driver"``, or ``""``).
    install : str
        The fix an import error gives.
    signature : str
        The ``__call__`` a class's instances must define (``"__call__(event)"``).

    Raises
    ------
    ConfigError
        The module cannot be imported, the attribute does not exist or is not callable. A
        :class:`~kafka_group.errors.KafkaGroupError` the module raises while importing (a missing
        extra's :class:`~kafka_group.errors.DependencyError`) passes through: it says what to do itself.
    """
    module_name, attribute = check_callable_spec(option, spec).split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if isinstance(exc, KafkaGroupError):
            raise
        raise ConfigError(f"{origin}: cannot import module '{module_name}'{where} ({exc}). {install}") from exc
    target = getattr(module, attribute, None)
    if target is None or not callable(target):
        raise ConfigError(f"{origin}: '{module_name}' has no callable named '{attribute}'")
    if inspect.isclass(target):
        target = target()
        if not callable(target):
            raise ConfigError(f"{origin}: instances of '{spec}' are not callable; define {signature}")
    return target  # type: ignore[no-any-return]
