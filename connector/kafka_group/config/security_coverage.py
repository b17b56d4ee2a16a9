"""Which test covers each row of the security table of docs/security.md (the *tested by* column).

Keyed by the first column of :data:`kafka_group.config.security.SECURITY_OPTIONS`; a row with no
entry is covered by the unit tests of the translation only. Short names, explained under the table:

* ``parity[MODE-STORE]``: ``test_spark_kafka_and_kafka_group_read_the_same_rows_with_the_same_java_options``
  (``tests/integration/test_secured_kafka.py``): the option given unchanged to Spark's
  ``format("kafka")`` and to ``kafka-group`` reads the same rows from a real secured Apache Kafka;
* ``flow+tools``: ``test_flow_control_and_both_offsets_tools_on_a_secured_cluster`` (the same file): a
  stream with flow control, the offsets tool and Kafka's ``kafka-consumer-groups`` with the option in a
  ``--command-config`` properties file;
* ``provider``: ``test_a_password_from_a_config_provider_reads_with_both_sources`` (the same file);
* ``unit``: ``tests/unit/test_security_translation.py`` (and ``test_config_providers.py``).
"""

from __future__ import annotations

from typing import Dict

__all__ = ["TESTED_BY", "UNIT_ONLY"]

#: What the table says for a row with no entry.
UNIT_ONLY = "unit"

_SASL = "parity[plain-JKS], parity[scram-sha-256-JKS], parity[scram-sha-512-JKS], parity[oauthbearer-JKS]"
_TLS = "parity[ssl-JKS], parity[ssl-PKCS12], parity[sasl_ssl-plain-PKCS12]"

#: Row of the security table to the tests that cover it against a real broker (besides ``unit``).
TESTED_BY: Dict[str, str] = {
    "security.protocol": f"{_SASL}, {_TLS}, flow+tools; unit",
    "sasl.mechanism": f"{_SASL}, parity[sasl_ssl-plain-PKCS12], flow+tools; unit",
    "sasl.jaas.config": f"{_SASL}, parity[sasl_ssl-plain-PKCS12], provider, flow+tools; unit",
    "sasl.jaas.config: PlainLoginModule": "parity[plain-JKS], parity[sasl_ssl-plain-PKCS12], provider, flow+tools; unit",
    "sasl.jaas.config: ScramLoginModule": "parity[scram-sha-256-JKS], parity[scram-sha-512-JKS]; unit",
    "sasl.jaas.config: OAuthBearerLoginModule (unsecured)": "parity[oauthbearer-JKS]; unit",
    "ssl.truststore.location, .password, .type (JKS, PKCS12, PEM)":
        f"{_TLS} (JKS, PKCS12), flow+tools (PKCS12); PEM: unit",
    "ssl.keystore.location, .password, .type (JKS, PKCS12, PEM), ssl.key.password":
        "parity[ssl-JKS], parity[ssl-PKCS12]; PEM: unit",
    "ssl.endpoint.identification.algorithm": f"{_TLS} (`\"\"`), flow+tools; unit",
    "config.providers, config.providers.NAME.class, config.providers.NAME.param.*":
        "provider (`file`); unit (`env`, `dir`)",
}
