"""Catalog names next to locations: the grammar, the ambiguity rule, Unity Catalog's credentials as storage options."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from kafka_group.config.option_catalog import OFFSETS_TABLE
from kafka_group.delta.storage.table_names import ResolvedTable, check_location, parse_table_name, quoted_table_name
from kafka_group.delta.storage.unity_catalog import UnityCatalog, storage_options_of
from kafka_group.errors import ConfigError, OffsetStoreError


@pytest.mark.parametrize("name, parts", [
    ("orders", ("orders",)),
    ("sales.orders_bronze", ("sales", "orders_bronze")),
    ("main.sales.orders_bronze", ("main", "sales", "orders_bronze")),
    ("main.`sales-eu`.`a``b`", ("main", "sales-eu", "a`b")),
])
def test_names_parse_into_their_parts(name: str, parts: Tuple[str, ...]) -> None:
    assert parse_table_name(name) == parts


@pytest.mark.parametrize("name", ["", "/lake/orders", "s3://b/t", "a.b.c.d", "a..b", "1abc", "a; DROP TABLE x"])
def test_what_is_not_a_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="is not 'table', 'schema.table' or 'catalog.schema.table'"):
        parse_table_name(name)


def test_a_quoted_name_cannot_escape_its_backquotes() -> None:
    assert quoted_table_name(("main", "x` ; DROP TABLE y; `")) == "`main`.`x`` ; DROP TABLE y; ```"


@pytest.mark.parametrize("location", ["/lake/orders", "./sales.orders", "s3://lake/main.sales.orders", "orders",
                                      "file:/tmp/t", "C:/lake/x.y"])
def test_locations_are_kept(location: str) -> None:
    assert check_location(location, where="DeltaSink(path)") == location


@pytest.mark.parametrize("value", ["sales.orders", "main.sales.orders_bronze"])
def test_a_dotted_name_is_never_taken_for_a_relative_folder(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        OFFSETS_TABLE.parser("offsets.table", value)
    assert f"DeltaSink(table='{value}')" in str(err.value) and f"'./{value}'" in str(err.value)


def test_resolved_tables_give_the_source_its_options_and_hide_credentials() -> None:
    t = ResolvedTable("main.s.t", "s3://b/t", {"AWS_SECRET_ACCESS_KEY": "sekret"})
    assert t.source_options() == {"offsets.table": "s3://b/t", "offsets.table.storage.AWS_SECRET_ACCESS_KEY": "sekret"}
    assert "sekret" not in repr(t)


def test_unity_catalog_credentials_become_delta_rs_storage_options() -> None:
    aws = {"aws_temp_credentials": {"access_key_id": "AK", "secret_access_key": "SK", "session_token": "ST"},
           "expiration_time": 1}
    assert storage_options_of(aws, "m.s.t") == {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK",
                                                "AWS_SESSION_TOKEN": "ST"}
    assert storage_options_of({"azure_user_delegation_sas": {"sas_token": "sv=1&sig=X"}}, "m.s.t") == {
        "AZURE_STORAGE_SAS_TOKEN": "sv=1&sig=X"}
    with pytest.raises(OffsetStoreError, match="gcp_oauth_token") as err:
        storage_options_of({"gcp_oauth_token": {"oauth_token": "TOKEN-SECRET"}}, "m.s.t")
    assert "TOKEN-SECRET" not in str(err.value)


def test_unity_catalog_takes_http_addresses_and_never_shows_its_token() -> None:
    with pytest.raises(ConfigError, match="http"):
        UnityCatalog("file:///etc/passwd")
    assert "tok-secret" not in repr(UnityCatalog("https://uc.example.com/", token="tok-secret"))
    with pytest.raises(ConfigError, match="catalog.schema.table"):
        UnityCatalog("https://uc.example.com").resolve("sales.orders")


def test_unity_catalog_sends_its_token_to_no_address_it_is_redirected_to() -> None:
    import http.server
    import threading

    seen: List[Tuple[str, object]] = []
    address: List[int] = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{address[0]}/elsewhere")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    address.append(server.server_port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        catalog = UnityCatalog(f"http://127.0.0.1:{server.server_port}", token="tok-secret", timeout_s=10)
        with pytest.raises(OffsetStoreError, match="HTTP 302") as err:
            catalog.resolve("main.sales.orders")
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _ in seen] == ["/api/2.1/unity-catalog/tables/main.sales.orders"]
    assert "tok-secret" not in str(err.value)


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "exactly one of the two"),
    (("/lake/t",), {"table": "main.s.t"}, "exactly one of the two"),
    (("main.sales.orders",), {}, "DeltaSink(table='main.sales.orders')"),
    ((), {"table": "/lake/t"}, "is not 'table'"),
])
def test_delta_sink_takes_a_location_or_a_name_never_both_nor_a_name_as_a_path(
        args: Tuple[str, ...], kwargs: Dict[str, Any], message: str) -> None:
    from pyspark_kafka_group import DeltaSink

    with pytest.raises(ConfigError) as err:
        DeltaSink(*args, **kwargs)
    assert message in str(err.value)


def test_delta_sink_by_name_shows_the_name() -> None:
    from pyspark_kafka_group import DeltaSink

    assert repr(DeltaSink(table="main.sales.orders", storage_options={"K": "secret"})) == \
        "DeltaSink(table='main.sales.orders', partition_by=None)"
