"""Kafka client settings from a properties file or the environment, for the command-line tools.

Kafka's own tools take a secured cluster's settings from ``--command-config FILE`` (a Java
properties file: ``security.protocol=SASL_SSL``, ``sasl.jaas.config=...``). The connector's
tools read the same file, and environment variables ``KAFKA_GROUP_KAFKA_<SETTING>`` (the
setting upper-cased, dots as underscores: ``KAFKA_GROUP_KAFKA_SASL_PASSWORD``), never secrets
on the command line (other users of the host see it in ``ps``). The settings are translated as
the source's options are (:func:`kafka_group.config.security.translate_security`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from kafka_group.config.config_providers import resolve_references
from kafka_group.config.properties_text import parse_properties
from kafka_group.config.security import translate_security
from kafka_group.errors import ConfigError
from kafka_group.redaction import register_client_secrets

__all__ = ["ENV_PREFIX", "parse_properties", "tool_client_settings"]

#: The prefix of environment variables holding Kafka client settings.
ENV_PREFIX = "KAFKA_GROUP_KAFKA_"


def tool_client_settings(command_config: Optional[str], environ: Mapping[str, str],
                         bootstrap_servers: Optional[str]) -> Dict[str, str]:
    """The Kafka client settings of a tool: the properties file, then the environment, then
    ``--bootstrap-servers``; secrets registered for scrubbing, Java forms translated.

    Raises
    ------
    ConfigError
        The file cannot be read, a setting is given twice (file and environment), no bootstrap
        servers, or a setting cannot be translated.
    """
    settings: Dict[str, str] = {}
    if command_config:
        try:
            with open(command_config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"--command-config '{command_config}' cannot be read ({exc.strerror})") from None
        settings = {k[len("kafka."):] if k.startswith("kafka.") else k: v for k, v in parse_properties(text).items()}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX):
            key = name[len(ENV_PREFIX):].lower().replace("_", ".")
            if key in settings:
                raise ConfigError(f"Kafka setting '{key}' is given by --command-config and by ${name}: keep one")
            settings[key] = value
    if bootstrap_servers:
        settings["bootstrap.servers"] = bootstrap_servers
    if not settings.get("bootstrap.servers", "").strip():
        raise ConfigError("give the brokers with --bootstrap-servers (or bootstrap.servers in --command-config)")
    settings = resolve_references(settings, prefix="", environ=environ, where="this host").options
    register_client_secrets(settings)
    return translate_security(settings)
