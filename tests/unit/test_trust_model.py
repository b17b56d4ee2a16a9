"""The "Trust model" section of SECURITY.md: who can do what to a running query.

The section must exist, speak of each party the issue names, and list every option that
makes the connector (or the Kafka client it configures) load or run code: each option the
catalog declares as a ``module:callable``, and librdkafka's settings that load a library or
run a command. A ``module:callable`` option added to the catalog without a line in the
section fails here.
"""

from __future__ import annotations

import pathlib
import re

from kafka_group.config.option_catalog import OPTIONS

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: librdkafka settings that load a shared library or run a command, as ``kafka.*`` options.
CLIENT_CODE_SETTINGS = ("kafka.plugin.library.paths", "kafka.ssl.engine.location", "kafka.ssl.providers",
                        "kafka.sasl.kerberos.kinit.cmd")

#: The parties whose powers the section states.
PARTIES = ("notebook", "other users on the driver", "READ on the group", "write the Delta table", "write the checkpoint",
           "Spark Connect client")


def _section() -> str:
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    found = re.search(r"^## Trust model\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert found, "SECURITY.md has no '## Trust model' section"
    return found.group(1)


def test_the_trust_model_names_each_party() -> None:
    section = _section()
    missing = [party for party in PARTIES if party.lower() not in section.lower()]
    assert missing == [], f"the trust model does not speak of: {missing}"


def test_the_trust_model_lists_every_option_that_loads_code() -> None:
    section = _section()
    hooks = [option.name for option in OPTIONS if "module:callable" in option.type_text]
    assert hooks, "the catalog declares no module:callable option (rebalanceListener at least)"
    missing = [name for name in (*hooks, *CLIENT_CODE_SETTINGS) if f"`{name}`" not in section]
    assert missing == [], f"options that load code, not listed in the trust model: {missing}"


def test_the_trust_model_says_how_to_reset_offsets_safely() -> None:
    section = _section()
    assert "--execute" in section and "dry run" in section.lower()
    assert "KAFKA_GROUP_FAULT_POINT" in section  # and that the crash tests' hook is not in the wheel
