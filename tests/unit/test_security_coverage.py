"""The security table's (docs/security.md) *tested by* column names real rows and real tests."""

from __future__ import annotations

import pathlib
import re

from kafka_group.config.security import SECURITY_OPTIONS
from kafka_group.config.security_coverage import TESTED_BY

_SECURED = pathlib.Path(__file__).resolve().parents[1] / "integration" / "test_secured_kafka.py"


def test_every_covered_row_is_a_row_of_the_table() -> None:
    rows = {option for option, _, _ in SECURITY_OPTIONS}
    assert set(TESTED_BY) <= rows, f"not rows of SECURITY_OPTIONS: {sorted(set(TESTED_BY) - rows)}"


def test_every_parity_case_named_is_a_case_of_the_parity_test() -> None:
    source = _SECURED.read_text(encoding="utf-8")
    for name in ("test_spark_kafka_and_kafka_group_read_the_same_rows_with_the_same_java_options",
                 "test_flow_control_and_both_offsets_tools_on_a_secured_cluster",
                 "test_a_password_from_a_config_provider_reads_with_both_sources"):
        assert f"def {name}(" in source, name
    cases = set(re.findall(r'\("([a-z0-9_-]+)", "(JKS|PKCS12)"\)', source))
    named = {tuple(case.rsplit("-", 1))
             for text in TESTED_BY.values() for case in re.findall(r"parity\[([^\]]+)\]", text)}
    assert named and named <= cases, f"parity cases named but not run: {sorted(named - cases)}"
