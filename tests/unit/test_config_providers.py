"""Secrets from the platform (issue 28 item 6): Kafka's config providers (``${env:VAR}``,
``${file:/path:key}``, ``${dir:/path:file}``) resolved at ``load()`` on the driver, as the Java client
resolves them for ``format("kafka")``; refused when they cannot be resolved (the error names the option
and the reference, never a value); every resolved value scrubbed, in every process that gets the options."""

from __future__ import annotations

import logging
import pathlib
import pickle
import subprocess
import sys
from typing import Dict

import pytest

from kafka_group.config.client_properties import tool_client_settings
from kafka_group.config.config_providers import resolve_references
from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError
from kafka_group.redaction import scrub

PACKAGE = "org.apache.kafka.common.config.provider."
ENV = {"kafka.config.providers": "env", "kafka.config.providers.env.class": PACKAGE + "EnvVarConfigProvider"}
FILE = {"kafka.config.providers": "file", "kafka.config.providers.file.class": PACKAGE + "FileConfigProvider"}
DIR = {"kafka.config.providers": "dir", "kafka.config.providers.dir.class": PACKAGE + "DirectoryConfigProvider"}
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g",
        "kafka.security.protocol": "SASL_PLAINTEXT"}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SECRET = "Provided-Pa55word-4417"


def jaas(password: str) -> str:
    return f'{PLAIN} required username="alice" password="{password}";'


def parse(**options: str) -> object:
    return parse_source_options({**BASE, **options})


def properties(folder: pathlib.Path, text: str = f"password={SECRET}\nuser=alice\n") -> pathlib.Path:
    path = folder / "secrets.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_env_reference_inside_jaas_becomes_the_sasl_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    parsed = parse_source_options({**BASE, **ENV, "kafka.sasl.jaas.config": jaas("${env:KAFKA_PASSWORD}")})
    assert parsed.client_config["sasl.password"] == SECRET
    assert parsed.client_config["sasl.username"] == "alice"
    # The declarations are the connector's: librdkafka would refuse them as unknown properties.
    assert not any(key.startswith("config.providers") for key in parsed.client_config)
    assert SECRET not in repr(parsed)


def test_file_reference_of_librdkafkas_own_password(tmp_path: pathlib.Path) -> None:
    path = properties(tmp_path)
    parsed = parse_source_options({**BASE, **FILE, "kafka.sasl.mechanism": "PLAIN",
                                   "kafka.sasl.username": f"${{file:{path}:user}}",
                                   "kafka.sasl.password": f"${{file:{path}:password}}"})
    assert (parsed.client_config["sasl.username"], parsed.client_config["sasl.password"]) == ("alice", SECRET)


def test_dir_reference_reads_the_whole_file_as_kafka_does(tmp_path: pathlib.Path) -> None:
    """A mounted secret (Kubernetes, a Databricks volume): one file per key, its bytes as they are."""
    (tmp_path / "password").write_text(SECRET, encoding="utf-8")
    parsed = parse_source_options({**BASE, **DIR, "kafka.sasl.jaas.config": jaas(f"${{dir:{tmp_path}:password}}")})
    assert parsed.client_config["sasl.password"] == SECRET


def test_several_references_and_any_provider_name(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Providers are named by the user (Databricks' shaded class names accepted); one value may hold several
    references; a storage option of the offsets table is resolved too."""
    monkeypatch.setenv("KAFKA_USER", "alice")
    path = properties(tmp_path)
    parsed = parse_source_options({
        **BASE, "kafka.config.providers": "vars, secrets",
        "kafka.config.providers.vars.class": "kafkashaded." + PACKAGE + "EnvVarConfigProvider",
        "kafka.config.providers.secrets.class": PACKAGE + "FileConfigProvider",
        "kafka.sasl.jaas.config": f'{PLAIN} required username="${{vars:KAFKA_USER}}" '
                                  f'password="${{secrets:{path}:password}}";',
        "offsets.table": "s3://lake/offsets",
        "offsets.table.storage.aws_secret_access_key": f"${{secrets:{path}:password}}"})
    assert (parsed.client_config["sasl.username"], parsed.client_config["sasl.password"]) == ("alice", SECRET)
    assert parsed.offsets_table_storage["aws_secret_access_key"] == SECRET


def test_references_are_left_alone_without_providers(caplog: pytest.LogCaptureFixture) -> None:
    """As the Java client: without 'config.providers' a value is passed as it is (a password may hold '${');
    a warning names the option, not the value."""
    literal = "${env:KAFKA_PASSWORD}"
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        parsed = parse_source_options({**BASE, "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "alice",
                                       "kafka.sasl.password": literal})
    assert parsed.client_config["sasl.password"] == literal
    assert "option 'kafka.sasl.password'" in caplog.text and literal not in caplog.text


@pytest.mark.parametrize("options, message", [
    ({"kafka.config.providers": "vault"}, r"names provider 'vault', but 'kafka.config.providers.vault.class' is not set"),
    ({"kafka.config.providers": "vault", "kafka.config.providers.vault.class": "com.example.VaultConfigProvider"},
     r"option 'kafka.config.providers.vault.class' is 'com.example.VaultConfigProvider': kafka-group resolves "
     r"references with Kafka's own providers only .* and loads no provider class"),
    ({**ENV, "kafka.config.providers.file.class": PACKAGE + "FileConfigProvider"},
     r"option 'kafka.config.providers.file.class' configures provider 'file', which 'kafka.config.providers' "
     r"does not list"),
    ({**ENV, "kafka.config.providers.env.param.allowed.paths": "/etc"},
     r"'kafka.config.providers.env.param.allowed.paths' is not a parameter of Kafka's env provider: it takes "
     r"'kafka.config.providers.env.param.allowlist.pattern'"),
    ({**FILE, "kafka.config.providers.file.param.allowed.paths": "secrets"}, r"names path 'secrets', which is not "
     r"absolute"),
])
def test_bad_declarations_are_refused(options: Dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options({**BASE, **options})


def test_unresolvable_references_name_the_option_and_the_reference(
        monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("KAFKA_NO_SUCH_VARIABLE", raising=False)
    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    path = properties(tmp_path)
    both = {"kafka.config.providers": "env,file,dir",
            "kafka.config.providers.env.class": PACKAGE + "EnvVarConfigProvider",
            "kafka.config.providers.file.class": PACKAGE + "FileConfigProvider",
            "kafka.config.providers.dir.class": PACKAGE + "DirectoryConfigProvider"}
    cases = {
        "${env:KAFKA_NO_SUCH_VARIABLE}": r"refers to \$\{env:KAFKA_NO_SUCH_VARIABLE\}: no environment variable "
                                         r"'KAFKA_NO_SUCH_VARIABLE' is set on the driver",
        "${env:/etc:KAFKA_PASSWORD}": r"an environment variable reference takes no path",
        f"${{file:{tmp_path}/missing.properties:password}}": r"missing.properties' cannot be read on the driver "
                                                            r"\(No such file or directory\)",
        f"${{file:{path}:nope}}": r"the properties file has no key 'nope'",
        "${file:password}": r"a file reference needs a path: \$\{file:/path/file.properties:key\}",
        f"${{dir:{path}:password}}": r"is not a folder on the driver",
        f"${{dir:{tmp_path}:nope}}": r"the folder has no file 'nope'",
        f"${{dir:{tmp_path}:../{tmp_path.name}/secrets.properties}}": r"the folder has no file",
        "${vault:kafka/password}": r"refers to provider 'vault' \(\$\{vault:kafka/password\}\), which "
                                   r"'kafka.config.providers' does not declare",
    }
    for reference, message in cases.items():
        with pytest.raises(ConfigError, match=r"option 'kafka.sasl.jaas.config' .*" + message) as error:
            parse_source_options({**BASE, **both, "kafka.sasl.jaas.config": jaas(reference)})
        assert SECRET not in str(error.value)


def test_the_providers_parameters_are_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Kafka's 'allowlist.pattern' (env) and 'allowed.paths' (file, dir): outside them a reference is refused."""
    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    monkeypatch.setenv("HOME_SECRET", SECRET)
    allow = {**ENV, "kafka.config.providers.env.param.allowlist.pattern": "^KAFKA_"}
    assert parse_source_options({**BASE, **allow, "kafka.sasl.jaas.config": jaas("${env:KAFKA_PASSWORD}")})
    with pytest.raises(ConfigError, match=r"the variable does not match the provider's 'allowlist.pattern'"):
        parse_source_options({**BASE, **allow, "kafka.sasl.jaas.config": jaas("${env:HOME_SECRET}")})
    path = properties(tmp_path)
    inside = {**FILE, "kafka.config.providers.file.param.allowed.paths": f"/nonexistent,{tmp_path}"}
    assert parse_source_options({**BASE, **inside, "kafka.sasl.jaas.config": jaas(f"${{file:{path}:password}}")})
    outside = {**FILE, "kafka.config.providers.file.param.allowed.paths": f"{tmp_path}/sub"}
    for sneaky in (str(path), f"{tmp_path}/sub/../secrets.properties"):
        with pytest.raises(ConfigError, match=r"the path is outside the provider's 'allowed.paths'"):
            parse_source_options({**BASE, **outside, "kafka.sasl.jaas.config": jaas(f"${{file:{sneaky}:password}}")})


def test_every_resolved_value_is_scrubbed_even_under_a_harmless_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value from a provider is a secret whatever its key: it is scrubbed from logs, errors and repr."""
    monkeypatch.setenv("KAFKA_CLIENT_TAG", SECRET)
    parsed = parse_source_options({**BASE, **ENV, "kafka.client.rack": "${env:KAFKA_CLIENT_TAG}"})
    assert parsed.client_config["client.rack"] == SECRET
    assert SECRET not in repr(parsed) and scrub(f"rack {SECRET}") == "rack ***"


def test_another_process_that_unpickles_the_options_scrubs_the_resolved_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Executors and Spark's planning worker unpickle the options: the resolved values are registered there too
    (under a key that is no secret by name, only the provided values say so)."""
    monkeypatch.setenv("KAFKA_CLIENT_TAG", SECRET)
    parsed = parse_source_options({**BASE, **ENV, "kafka.client.rack": "${env:KAFKA_CLIENT_TAG}"})
    script = ("import pickle, sys\nfrom kafka_group.redaction import scrub\n"
              "pickle.loads(sys.stdin.buffer.read())\nprint(scrub('rack " + SECRET + "'))\n")
    out = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(parsed), capture_output=True, check=True)
    assert out.stdout.decode().strip() == "rack ***"


def test_the_option_text_keeps_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Spark keeps in its plan is the options as given: resolution never changes them."""
    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    given = {**BASE, **ENV, "kafka.sasl.jaas.config": jaas("${env:KAFKA_PASSWORD}")}
    before = dict(given)
    parse_source_options(given)
    assert given == before


def test_kafkas_pattern_never_spans_two_references() -> None:
    resolved = resolve_references({"kafka.x": "${env:A}:${env:B}", **ENV}, prefix="kafka.",
                                  environ={"A": "first-value", "B": "second-value"})
    assert resolved.options == {"kafka.x": "first-value:second-value"}
    assert set(resolved.secrets) == {"first-value", "second-value"}


def test_the_offsets_tool_resolves_references_of_its_properties_file(tmp_path: pathlib.Path) -> None:
    """Kafka's tools resolve config providers in --command-config; the offsets tool too (its environment
    variables' references from the environment it was given)."""
    path = properties(tmp_path)
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nconfig.providers=file,env\n"
                      f"config.providers.file.class={PACKAGE}FileConfigProvider\n"
                      f"config.providers.env.class={PACKAGE}EnvVarConfigProvider\n"
                      f"sasl.jaas.config={PLAIN} required username=\"${{env:TOOL_USER}}\" "
                      f"password=\"${{file:{path}:password}}\";\n", encoding="utf-8")
    settings = tool_client_settings(str(config), {"TOOL_USER": "alice"}, "b:9092")
    assert (settings["sasl.username"], settings["sasl.password"]) == ("alice", SECRET)
    assert not any(key.startswith("config.providers") for key in settings)
    with pytest.raises(ConfigError, match=r"no environment variable 'TOOL_USER' is set on this host"):
        tool_client_settings(str(config), {}, "b:9092")
