"""The public API of ``pyspark_kafka_group`` is what ``tests/data/public_api.json`` records: a move between the
package's folders never breaks a user's import, and a change of a name or a signature is made on purpose.

On purpose: change the code, run ``python -m tests.public_api --write``, commit the record with the change
(and say so in the changelog). ``tests/public_api.py`` reads the API and renders the record.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.public_api import COMMAND, RECORD, ROOT, differences, main, public_api, public_modules, render


def test_the_public_api_is_the_recorded_one() -> None:
    recorded = json.loads((ROOT / RECORD).read_text(encoding="utf-8"))
    changed = differences(recorded, public_api())
    assert changed == [], (
        "the public API of pyspark_kafka_group differs from " + RECORD + ":\n  " + "\n  ".join(changed)
        + f"\nA user's import or call breaks on a removed, renamed or changed name: keep the old one (a public "
        f"module at the old path may re-export it from its new home). If the change is meant, run `{COMMAND} "
        f"--write` and commit {RECORD} with it.")
    assert (ROOT / RECORD).read_text(encoding="utf-8") == render()


def test_the_record_names_the_modules_users_import() -> None:
    modules = public_modules()
    assert {"pyspark_kafka_group", "pyspark_kafka_group.debezium", "pyspark_kafka_group.flow",
            "pyspark_kafka_group.metrics", "pyspark_kafka_group.prometheus", "pyspark_kafka_group.lag_plot"} <= set(
        modules)
    api = public_api(["pyspark_kafka_group"])["pyspark_kafka_group"]
    assert {"DeltaSink", "resolve_table", "UnityCatalog", "DefaultSource"} <= set(api)
    assert api["DeltaSink"]["constructor"].startswith("(path: 'Optional[str]' = None, *, table:")


def test_differences_name_a_removed_a_renamed_a_changed_and_a_new_name() -> None:
    recorded = {"m": {"a": {"kind": "function", "signature": "(x: 'int') -> 'int'"},
                      "b": {"kind": "function", "signature": "() -> 'None'"}}, "gone": {}}
    current = {"m": {"a": {"kind": "function", "signature": "(x: 'int', y: 'int') -> 'int'"},
                     "b2": {"kind": "function", "signature": "() -> 'None'"}}}
    assert differences(recorded, current) == [
        "gone: the module is gone (users import it by this name)",
        "m.a: changed\n    recorded: {\"kind\": \"function\", \"signature\": \"(x: 'int') -> 'int'\"}"
        "\n    now:      {\"kind\": \"function\", \"signature\": \"(x: 'int', y: 'int') -> 'int'\"}",
        "m.b: removed or renamed (users import it by this name)",
        "m.b2: exported but not recorded yet",
    ]


def test_the_command_writes_and_checks_the_record(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "api.json"
    assert main(["--check", str(record)]) == 1
    assert f"run `{COMMAND} --write {record}`" in capsys.readouterr().err
    assert main(["--write", str(record)]) == 0
    assert main(["--check", str(record)]) == 0
    assert json.loads(record.read_text(encoding="utf-8")) == public_api()
    assert main(["--write", str(record), "extra"]) == 2

