"""Java truststores and keystores (JKS, PKCS#12, PEM) read into PEM text librdkafka takes inline.

librdkafka reads no Java store. The connector reads the store once, on the driver when the
options are parsed, and hands the clients its certificates and key as PEM text
(``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``), so executors need no file.

* PKCS#12 is read with the ``cryptography`` package (the ``security`` extra:
  ``pip install 'pyspark-kafka-group[security]'``).
* JKS (and JCEKS) is read with Java's own ``keytool``: a JKS store comes from a Java tool, and
  the driver of a Spark application runs on a JVM (``$JAVA_HOME/bin/keytool``, else ``keytool``
  on the PATH). A truststore is listed as PEM (``keytool -list -rfc``); a keystore is converted
  to a throwaway PKCS#12 file in a private temporary folder, then read as PKCS#12. Passwords
  reach keytool through its environment (``-storepass:env``), never its command line. (The
  Python JKS reader ``pyjks`` has had no release since 2020; keytool is maintained with Java.)
* PEM files are read as they are.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.redaction import scrub

__all__ = ["StorePem", "read_truststore", "read_keystore", "store_type"]

_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
_PEM_KEY = re.compile(r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----.+?-----END (?:[A-Z ]+ )?PRIVATE KEY-----", re.S)
_KEYTOOL_TIMEOUT_S = 120


@dataclass(frozen=True)
class StorePem:
    """What a store holds, as PEM text.

    Attributes
    ----------
    certificates : str
        The certificates: a truststore's trusted ones; a keystore's own first, then its chain.
    key : str
        A keystore's private key (PKCS#8, unencrypted: a secret); empty for a truststore.
    """

    certificates: str
    key: str = field(default="", repr=False)


def store_type(option: str, data: bytes, declared: Optional[str]) -> str:
    """The store's type: ``declared`` (``kafka.ssl.*store.type``) or, when not set, what the bytes are."""
    if declared:
        kind = declared.strip().upper()
        if kind in ("JKS", "JCEKS", "PKCS12", "PEM"):
            return kind
        if kind == "P12":
            return "PKCS12"
        raise ConfigError(f"option '{option}' must be JKS, PKCS12 or PEM, got '{declared}'")
    if data[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if data[:4] == b"\xce\xce\xce\xce":
        return "JCEKS"
    if data.lstrip()[:5] == b"-----":
        return "PEM"
    return "PKCS12"


def _read(option: str, location: str) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"option '{option}' names '{location}', which cannot be read on the driver "
                          f"({exc.strerror}): the connector reads the store there and hands executors its "
                          "certificates, so only the driver needs the file") from None


def _stamp(location: str) -> Tuple[int, int]:
    """When and how big the file is (a store read before is read again only once it changed)."""
    try:
        info = os.stat(location)
    except OSError:
        return (0, -1)
    return (info.st_mtime_ns, info.st_size)


def read_truststore(location: str, password: Optional[str], declared_type: Optional[str]) -> StorePem:
    """:func:`_read_truststore`, remembered per file version: Spark builds the data source (and parses
    its options) in several Python workers, and a JKS store costs a keytool run (a JVM start)."""
    return _read_truststore(location, _stamp(location), password, declared_type)


def read_keystore(location: str, password: Optional[str], declared_type: Optional[str],
                  key_password: Optional[str]) -> StorePem:
    """:func:`_read_keystore`, remembered per file version (see :func:`read_truststore`)."""
    return _read_keystore(location, _stamp(location), password, declared_type, key_password)


@functools.lru_cache(maxsize=8)
def _read_truststore(location: str, stamp: Tuple[int, int], password: Optional[str],
                     declared_type: Optional[str]) -> StorePem:
    """The trusted certificates of the truststore at ``location`` (``kafka.ssl.truststore.*``).

    Raises
    ------
    ConfigError
        The file cannot be read, is not a store of that type, or the password is wrong.
    DependencyError
        A PKCS#12 store without the ``cryptography`` package.
    """
    prefix = "kafka.ssl.truststore"
    data = _read(f"{prefix}.location", location)
    kind = store_type(f"{prefix}.type", data, declared_type)
    if kind == "PEM":
        certs = _PEM_CERT.findall(data.decode("ascii", errors="replace"))
    elif kind == "PKCS12":
        key, certs = _pkcs12(prefix, data, password)
    else:
        certs = _PEM_CERT.findall(_keytool(prefix, ["-list", "-rfc", "-keystore", location, "-storetype", kind],
                                           {"-storepass": password}))
    if not certs:
        raise ConfigError(f"option '{prefix}.location' names a {kind} store without a certificate: give the store "
                          "holding the CA certificates that signed the brokers' certificates")
    return StorePem("\n".join(certs) + "\n")


@functools.lru_cache(maxsize=8)
def _read_keystore(location: str, stamp: Tuple[int, int], password: Optional[str], declared_type: Optional[str],
                   key_password: Optional[str]) -> StorePem:
    """The client certificate (with its chain) and private key of the keystore at ``location``.

    Raises
    ------
    ConfigError
        The file cannot be read, holds no private key, or a password is wrong.
    DependencyError
        A PKCS#12 or JKS store without the ``cryptography`` package.
    """
    prefix = "kafka.ssl.keystore"
    data = _read(f"{prefix}.location", location)
    kind = store_type(f"{prefix}.type", data, declared_type)
    if kind == "PEM":
        text = data.decode("ascii", errors="replace")
        keys, certs = _PEM_KEY.findall(text), _PEM_CERT.findall(text)
        if not keys or not certs:
            raise ConfigError(f"option '{prefix}.location' names a PEM file without a private key and a "
                              "certificate: give both in it")
        return StorePem("\n".join(certs) + "\n", keys[0] + "\n")
    if kind in ("JKS", "JCEKS"):
        data, password = _jks_to_pkcs12(location, kind, password, key_password)
    key, certs = _pkcs12(prefix, data, password)
    if not key:
        raise ConfigError(f"option '{prefix}.location' names a {kind} store without a private key: a keystore "
                          "holds the client's key and certificate (trusted certificates go in the truststore)")
    return StorePem("\n".join(certs) + "\n", key)


def _pkcs12(prefix: str, data: bytes, password: Optional[str]) -> Tuple[str, List[str]]:
    """The private key (PEM, or empty) and certificates (PEM, the key's own first) of a PKCS#12 store."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise DependencyError(
            f"option '{prefix}.location' names a PKCS#12 or JKS store, which the connector reads with the "
            "'cryptography' package: pip install 'pyspark-kafka-group[security]' (or give the store as PEM: "
            f"'{prefix}.type=PEM')") from None
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise ConfigError(f"option '{prefix}.location' could not be read as PKCS#12 with the password of "
                          f"'{prefix}.password': check the password and '{prefix}.type'") from None
    certs = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
    pems = [c.public_bytes(serialization.Encoding.PEM).decode("ascii").strip() for c in certs]
    key = ""
    if store.key is not None:
        key = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode("ascii")
    return key, pems


def _keytool_path(prefix: str) -> str:
    java_home = os.environ.get("JAVA_HOME", "")
    candidate = os.path.join(java_home, "bin", "keytool") if java_home else ""
    found = candidate if candidate and os.access(candidate, os.X_OK) else shutil.which("keytool")
    if not found:
        raise ConfigError(
            f"option '{prefix}.location' names a JKS store, which the connector reads with Java's keytool, and "
            "there is none here (set JAVA_HOME). Or convert the store to PKCS#12 once: keytool -importkeystore "
            f"-srckeystore store.jks -destkeystore store.p12 -deststoretype PKCS12, and set '{prefix}.type=PKCS12'")
    return found


def _keytool(prefix: str, args: List[str], passwords: Dict[str, Optional[str]]) -> str:
    """Run keytool with ``args``; each password goes through the environment (``-storepass:env``)."""
    env = dict(os.environ)
    command = [_keytool_path(prefix)] + args
    for flag, value in passwords.items():
        if value is None:
            continue
        var = f"KAFKA_GROUP_KEYTOOL_{flag.strip('-').upper()}"
        env[var] = value
        command += [f"{flag}:env", var]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=_KEYTOOL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"option '{prefix}.location': keytool could not run ({type(exc).__name__})") from None
    if done.returncode != 0:
        said = scrub((done.stdout + done.stderr).strip().splitlines()[-1:][0] if (done.stdout + done.stderr).strip()
                     else "no output")
        raise ConfigError(f"option '{prefix}.location' could not be read with keytool ({said}): check "
                          f"'{prefix}.password' and '{prefix}.type'")
    return done.stdout


def _jks_to_pkcs12(location: str, kind: str, password: Optional[str],
                   key_password: Optional[str]) -> Tuple[bytes, str]:
    """A JKS keystore converted to PKCS#12 bytes and their (throwaway) password."""
    prefix = "kafka.ssl.keystore"
    if not password:
        raise ConfigError(f"option '{prefix}.password' is needed to read the {kind} keystore's key")
    alias_args: List[str] = []
    passwords: Dict[str, Optional[str]] = {"-srcstorepass": password}
    if key_password and key_password != password:
        listing = _keytool(prefix, ["-list", "-keystore", location, "-storetype", kind], {"-storepass": password})
        aliases = [line.split(",")[0] for line in listing.splitlines() if "PrivateKeyEntry" in line]
        if len(aliases) != 1:
            raise ConfigError(f"option '{prefix}.location' names a {kind} store with {len(aliases)} private keys: "
                              "keep the client's one only")
        alias_args = ["-srcalias", aliases[0]]
        passwords["-srckeypass"] = key_password
    throwaway = secrets.token_urlsafe(24)
    passwords.update({"-deststorepass": throwaway, "-destkeypass": throwaway} if alias_args
                     else {"-deststorepass": throwaway})
    with tempfile.TemporaryDirectory(prefix="kafka-group-keystore-") as folder:
        target = os.path.join(folder, "store.p12")
        _keytool(prefix, ["-importkeystore", "-noprompt", "-srckeystore", location, "-srcstoretype", kind,
                          "-destkeystore", target, "-deststoretype", "PKCS12"] + alias_args, passwords)
        with open(target, "rb") as f:
            return f.read(), throwaway
