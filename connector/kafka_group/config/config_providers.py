"""Kafka's configuration providers: secrets referenced in option values, resolved at ``load()``.

The Java client resolves ``${provider:[path:]key}`` references in its settings with the
providers named by ``config.providers`` (KIP-297, KIP-887), so a password never has to be an
option literal; Spark's ``format("kafka")`` users write::

    kafka.config.providers=file
    kafka.config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    kafka.sasl.jaas.config=... password="${file:/etc/kafka/secrets.properties:password}";

:func:`resolve_references` makes the same options work for ``format("kafka-group")``. It
resolves the references on the driver, when the options are read at ``load()`` (before the
Java security settings are translated, :mod:`kafka_group.config.security`), so the group
member, the admin client and the executors' readers get the resolved settings; the option
text Spark keeps in its plan holds only the reference. Three provider classes are accepted,
Kafka's own, and none is loaded (the connector reads the environment, a properties file or a
folder itself):

===============================  =====================================  =================================
class (``config.providers.NAME.class``)  a reference                     resolves to
===============================  =====================================  =================================
``EnvVarConfigProvider``         ``${NAME:VARIABLE}``                   the environment variable
``FileConfigProvider``           ``${NAME:/path/file.properties:key}``  a key of a Java properties file
``DirectoryConfigProvider``      ``${NAME:/path/folder:file}``          a file's whole text (UTF-8)
===============================  =====================================  =================================

(``org.apache.kafka.common.config.provider.`` before each class; Databricks' ``kafkashaded.``
prefix accepted.) Their Kafka parameters are honoured: ``config.providers.NAME.param.allowlist.pattern``
(the environment variables an ``EnvVarConfigProvider`` may read) and
``config.providers.NAME.param.allowed.paths`` (the folders a file or folder provider may read).
Where the Java client leaves a reference it cannot resolve as it is (the broker then refuses
the login), the connector refuses the options with a :class:`~kafka_group.errors.ConfigError`
naming the option and the reference, never the resolved value; so it does for a provider class
other than the three, a reference to a provider not declared, a missing variable, file, key or
an unreadable file. Every resolved value is registered as a secret
(:func:`kafka_group.redaction.register_secret`).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

from kafka_group.config.properties_text import parse_properties
from kafka_group.errors import ConfigError
from kafka_group.redaction import register_secret

__all__ = ["PROVIDER_CLASSES", "Resolved", "resolve_references"]

_log = logging.getLogger(__name__)

_PACKAGE = "org.apache.kafka.common.config.provider."
_SHADED_PREFIXES = ("kafkashaded.",)

#: The provider classes the connector resolves (without their package), and the kind of each.
PROVIDER_CLASSES: Mapping[str, str] = {
    "EnvVarConfigProvider": "env",
    "FileConfigProvider": "file",
    "DirectoryConfigProvider": "dir",
}

#: The parameters (``config.providers.NAME.param.X``) of each kind.
_PARAMS: Mapping[str, Tuple[str, ...]] = {"env": ("allowlist.pattern",), "file": ("allowed.paths",),
                                          "dir": ("allowed.paths",)}

#: Kafka's own pattern (``ConfigTransformer.DEFAULT_PATTERN``): ``${provider:[path:]key}``.
_REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

_PROVIDERS = "config.providers"


@dataclass(frozen=True)
class _Provider:
    """One declared provider: its name (lower-cased: Spark lower-cases option keys), kind and parameters."""

    name: str
    kind: str
    allowed_paths: Optional[Tuple[str, ...]] = None
    allowlist: Optional["re.Pattern[str]"] = None


@dataclass(frozen=True)
class Resolved:
    """What :func:`resolve_references` returns.

    Attributes
    ----------
    options : dict of str to str
        The options with the ``config.providers*`` declarations removed and every reference
        replaced by its value.
    secrets : tuple of str
        Every resolved value (each registered with :func:`kafka_group.redaction.register_secret`
        in this process; a process that receives the options registers them again).
    """

    options: Dict[str, str]
    secrets: Tuple[str, ...] = ()


def resolve_references(options: Mapping[str, str], *, prefix: str, also: Sequence[str] = (),
                       environ: Optional[Mapping[str, str]] = None, where: str = "the driver") -> Resolved:
    """Resolve ``${provider:[path:]key}`` references with the providers declared among ``options``.

    Parameters
    ----------
    options : mapping of str to str
        Options with lower-cased keys: the source's (``prefix="kafka."``) or a tool's Kafka
        client settings (``prefix=""``).
    prefix : str
        The prefix of the Kafka client settings: the providers are declared by
        ``<prefix>config.providers``, and every value whose key starts with it is resolved.
    also : sequence of str
        Prefixes of further options whose values are resolved (``offsets.table.storage.``).
    environ : mapping of str to str, optional
        The environment of ``EnvVarConfigProvider`` (default: this process's).
    where : str
        Where this process runs, for the errors (``the driver``; a tool: ``this host``).

    Returns
    -------
    Resolved
        The options with references resolved, and the resolved values.

    Raises
    ------
    ConfigError
        A declaration is incomplete or names a class other than Kafka's three providers; a value
        refers to a provider not declared, a missing environment variable, file, folder or key, or
        a path or variable its provider's parameters do not allow. The message names the option
        and the reference, never a resolved value.
    """
    declaration = prefix + _PROVIDERS
    # Spark lower-cases option keys; a tool's properties file may not: declarations match in lower case.
    providers = _declared({k.lower(): v for k, v in options.items() if _is_declaration(k.lower(), declaration)},
                          declaration)
    rest = {k: v for k, v in options.items() if not _is_declaration(k.lower(), declaration)}
    if not providers:
        for key, value in rest.items():
            if _resolvable(key, prefix, also) and _REFERENCE.search(value):
                # The value is not shown: without providers it may be a literal password.
                _log.warning("option '%s' holds text of the form ${provider:key}, but '%s' is not set: it is "
                             "passed on as it is (declare the provider to resolve it)", key, declaration)
        return Resolved(rest)
    environment = os.environ if environ is None else environ
    secrets: Dict[str, None] = {}
    cache: Dict[str, Dict[str, str]] = {}
    for key, value in rest.items():
        if not _resolvable(key, prefix, also) or "${" not in value:
            continue
        pieces, last = [], 0
        for match in _REFERENCE.finditer(value):
            name, path, item = match.group(1), match.group(3) or "", match.group(4)
            provider = providers.get(name.lower())
            if provider is None:
                raise ConfigError(f"option '{key}' refers to provider '{name}' ({match.group(0)}), which "
                                  f"'{declaration}' does not declare: declare it, or fix the reference")
            resolved = _lookup(provider, path, item, f"option '{key}' refers to {match.group(0)}", where,
                               environment, cache)
            secrets[resolved] = None
            pieces += [value[last:match.start()], resolved]
            last = match.end()
        if pieces:
            rest[key] = "".join(pieces) + value[last:]
    for secret in secrets:
        register_secret(secret)
    return Resolved(rest, tuple(secrets))


def _is_declaration(key: str, declaration: str) -> bool:
    return key == declaration or key.startswith(declaration + ".")


def _resolvable(key: str, prefix: str, also: Sequence[str]) -> bool:
    return key.startswith(prefix) or any(key.startswith(p) for p in also)


def _declared(options: Mapping[str, str], declaration: str) -> Dict[str, _Provider]:
    """The providers ``<prefix>config.providers`` declares, checked (each declaration key used);
    ``options`` holds the declarations only, keys lower-cased."""
    names = [n.strip().lower() for n in options.get(declaration, "").split(",") if n.strip()]
    providers: Dict[str, _Provider] = {}
    for name in names:
        class_key = f"{declaration}.{name}.class"
        given = options.get(class_key, "").strip()
        if not given:
            raise ConfigError(f"option '{declaration}' names provider '{name}', but '{class_key}' is not set: "
                              f"set it to {_known_classes()}")
        kind = _kind(given)
        if kind is None:
            raise ConfigError(
                f"option '{class_key}' is '{given}': kafka-group resolves references with Kafka's own "
                f"providers only ({_known_classes()}) and loads no provider class. Use one of these, or pass "
                "the value another way")
        providers[name] = _provider(options, declaration, name, kind)
    for key in options:
        if not key.startswith(declaration + "."):
            continue
        name = key[len(declaration) + 1:].partition(".")[0]
        if name not in providers:
            raise ConfigError(f"option '{key}' configures provider '{name}', which '{declaration}' does not "
                              f"list{' (it is not set)' if not names else ''}: add '{name}' to it, or remove the option")
    return providers


def _kind(class_name: str) -> Optional[str]:
    for shaded in _SHADED_PREFIXES:
        if class_name.startswith(shaded):
            class_name = class_name[len(shaded):]
    if not class_name.startswith(_PACKAGE):
        return None
    return PROVIDER_CLASSES.get(class_name[len(_PACKAGE):])


def _known_classes() -> str:
    return ", ".join(_PACKAGE + c for c in PROVIDER_CLASSES)


def _provider(options: Mapping[str, str], declaration: str, name: str, kind: str) -> _Provider:
    """Provider ``name`` with its parameters (``allowed.paths``, ``allowlist.pattern``), checked."""
    base = f"{declaration}.{name}."
    allowed: Optional[Tuple[str, ...]] = None
    allowlist: Optional["re.Pattern[str]"] = None
    for key, value in options.items():
        if not key.startswith(base) or key == base + "class":
            continue
        param = key[len(base + "param."):] if key.startswith(base + "param.") else None
        if param not in _PARAMS[kind]:
            known = ", ".join(f"'{base}param.{p}'" for p in _PARAMS[kind])
            raise ConfigError(f"option '{key}' is not a parameter of Kafka's {kind} provider: it takes {known}")
        if param == "allowlist.pattern":
            try:
                allowlist = re.compile(value)
            except re.error as exc:
                raise ConfigError(f"option '{key}' is not a regular expression ({exc})") from None
        else:
            paths = tuple(os.path.normpath(p.strip()) for p in value.split(",") if p.strip())
            relative = [p for p in paths if not os.path.isabs(p)]
            if relative:
                raise ConfigError(f"option '{key}' names path '{relative[0]}', which is not absolute: give "
                                  "absolute paths, comma-separated")
            allowed = paths
    return _Provider(name, kind, allowed, allowlist)


def _lookup(provider: _Provider, path: str, item: str, what: str, where: str,
            environ: Mapping[str, str], cache: Dict[str, Dict[str, str]]) -> str:
    """The value of one reference, ``what`` naming it in errors (``cache`` reads each properties file once)."""
    if provider.kind == "env":
        if path:
            raise ConfigError(f"{what}: an environment variable reference takes no path: "
                              f"${{{provider.name}:VARIABLE}}")
        if provider.allowlist is not None and not provider.allowlist.search(item):
            raise ConfigError(f"{what}: the variable does not match the provider's 'allowlist.pattern'")
        value = environ.get(item)
        if value is None:
            raise ConfigError(f"{what}: no environment variable '{item}' is set on {where}")
        return value
    if not path:
        form = "/path/file.properties:key" if provider.kind == "file" else "/path/folder:file"
        raise ConfigError(f"{what}: a {provider.kind} reference needs a path: ${{{provider.name}:{form}}}")
    if provider.allowed_paths is not None and not _allowed(path, provider.allowed_paths):
        raise ConfigError(f"{what}: the path is outside the provider's 'allowed.paths'")
    if provider.kind == "file":
        if path not in cache:
            cache[path] = parse_properties(_read(path, what, where))
        value = cache[path].get(item)
        if value is None:
            raise ConfigError(f"{what}: the properties file has no key '{item}'")
        return value
    if not os.path.isdir(path):
        raise ConfigError(f"{what}: '{path}' is not a folder on {where}")
    name = os.path.join(path, item)
    if item in ("", ".", "..") or os.sep in item or not os.path.isfile(name):
        raise ConfigError(f"{what}: the folder has no file '{item}'")
    return _read(name, what, where)


def _allowed(path: str, allowed: Tuple[str, ...]) -> bool:
    """Whether ``path``, normalised, lies in one of ``allowed`` (as Kafka's ``AllowedPaths``: by path component)."""
    normal = os.path.normpath(path)
    return any(normal == a or normal.startswith(a.rstrip(os.sep) + os.sep) for a in allowed)


def _read(path: str, what: str, where: str) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:  # as Java reads it: no newline translation
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{what}: '{path}' cannot be read on {where} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what}: '{path}' is not UTF-8 text") from None
