"""Apache Kafka with authentication, TLS and ACLs on loopback: a throwaway secured development cluster.

:class:`SecuredKafka` is :class:`~kafka_group_devbroker.apache_kafka.ApacheKafka`
with three more listeners on every node:

========================  ==================  ======================================================
listener                  security protocol   clients authenticate with
========================  ==================  ======================================================
``SASL_PLAINTEXT``        SASL_PLAINTEXT      PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
``SASL_SSL``              SASL_SSL            the same mechanisms, over TLS
``SSL``                   SSL                 a client certificate (mTLS, required)
========================  ==================  ======================================================

OAUTHBEARER uses Kafka's *unsecured* test tokens (the broker's
``OAuthBearerUnsecuredValidatorCallbackHandler``; librdkafka's
``enable.sasl.oauthbearer.unsecure.jwt``): any client may claim any principal
on it. The validator (:mod:`~kafka_group_devbroker.msk_iam_validator`, compiled at start)
also accepts AWS MSK IAM tokens by their form (principal: the access key id); their AWS
signature cannot be verified here. TLS certificates come from a :class:`~kafka_group_devbroker.throwaway_ca.ThrowawayCA`
made at start; the broker's keystore is PKCS#12, its truststore the CA in PEM.

Authorization is KRaft's ``StandardAuthorizer``: without an ACL, nothing is
allowed (``allow.everyone.if.no.acl.found=false``). The super users are
``User:admin`` (its password is :data:`USERS`) and ``User:ANONYMOUS``: the
setup door is the ``PLAINTEXT`` listener (:attr:`bootstrap_servers`, also the
inter-broker and controller one), which the cluster's own helpers
(:meth:`create_topic`, ``produce`` in the tests) use. Every principal of the
secured listeners is the user name: PLAIN and SCRAM users are :data:`USERS`;
an OAUTHBEARER token's ``sub``; a client certificate's ``CN``
(``ssl.principal.mapping.rules``).

``User:alice`` may READ every topic and group from the start; ``User:bob`` has
no ACL: :meth:`grant` and :meth:`deny` give a principal READ on a topic or a
group. :meth:`client_config` gives the librdkafka settings of each
:data:`SECURITY_MODES` entry, :meth:`source_options` the same as
``kafka.``-prefixed Spark source options, and :meth:`java_options` the
options a user of Spark's ``format("kafka")`` gives for the same mode (JAAS, Java
truststores and keystores made with the JDK's ``keytool``).

The secrets are fixed and printed by ``kafka-group-broker --security``: this
cluster exists to test clients, on loopback, and is thrown away with its folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import Any, Mapping, Optional

from kafka_group.errors import EmbeddedBrokerError
from kafka_group_devbroker.apache_kafka import ApacheKafka, _free_port, _Node
from kafka_group_devbroker.msk_iam_validator import VALIDATOR_CLASS, compile_validator
from kafka_group_devbroker.throwaway_ca import IssuedCertificate, ThrowawayCA

__all__ = ["SECURITY_MODES", "SASL_MECHANISMS", "STORE_PASSWORD", "STORE_TYPES", "USERS", "SecuredKafka"]

logger = logging.getLogger(__name__)

#: The SASL mechanisms both SASL listeners accept.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: Ways a client connects (:meth:`SecuredKafka.client_config`): mode to (security protocol, SASL mechanism).
SECURITY_MODES: dict[str, tuple[str, Optional[str]]] = {
    "plain": ("SASL_PLAINTEXT", "PLAIN"),
    "scram-sha-256": ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    "scram-sha-512": ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    "oauthbearer": ("SASL_PLAINTEXT", "OAUTHBEARER"),
    "ssl": ("SSL", None),
    "sasl_ssl-plain": ("SASL_SSL", "PLAIN"),
    "sasl_ssl-scram-sha-512": ("SASL_SSL", "SCRAM-SHA-512"),
}

#: The users of PLAIN and SCRAM (every SCRAM mechanism), name to password. ``admin`` is a super user,
#: ``alice`` may read every topic and group, ``bob`` nothing until granted.
USERS: dict[str, str] = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL", "SSL")
_STORE_PASSWORD = "keystore-secret"

#: The password of every Java store :meth:`SecuredKafka.java_options` makes (and of the keys in them).
STORE_PASSWORD = "client-store-secret"

#: The Java store types :meth:`SecuredKafka.java_options` makes.
STORE_TYPES = ("JKS", "PKCS12")
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class SecuredKafka(ApacheKafka):
    """Apache Kafka (KRaft) with SASL, TLS, mTLS and ACLs on loopback, for tests of secured clients.

    Parameters
    ----------
    brokers : int, default 1
        Number of nodes.
    topics : dict of str to int, optional
        Topics to create at start, name to partition count.
    **options
        Further :class:`~kafka_group_devbroker.apache_kafka.ApacheKafka` options
        (``broker_config``, ``heap``, ``start_timeout``, ``log_level``).

    Examples
    --------
    >>> with SecuredKafka(topics={"orders": 2}) as kafka:  # doctest: +SKIP
    ...     consumer = confluent_kafka.Consumer({**kafka.client_config("scram-sha-512"), "group.id": "g"})

    Notes
    -----
    See the module's documentation for the listeners, users and super users.
    """

    engine = "kafka"

    def __init__(self, brokers: int = 1, topics: Optional[Mapping[str, int]] = None, **options: Any) -> None:
        super().__init__(brokers, topics, **options)
        self._ca: Optional[ThrowawayCA] = None
        self._ports: dict[int, dict[str, int]] = {}
        self._client_certificates: dict[str, IssuedCertificate] = {}

    # -- what clients need ------------------------------------------------------------

    @property
    def ca_pem(self) -> str:
        """str : The throwaway CA's certificate (PEM), which signed the brokers' and clients' certificates."""
        if self._ca is None:
            raise EmbeddedBrokerError("the secured Kafka cluster is not started: call start() first")
        return self._ca.certificate_pem

    def listener_servers(self, listener: str) -> str:
        """``bootstrap.servers`` of one listener of every node.

        Parameters
        ----------
        listener : {"SASL_PLAINTEXT", "SASL_SSL", "SSL", "PLAINTEXT"}
            The listener (``PLAINTEXT`` is :attr:`bootstrap_servers`, the super-user door).

        Returns
        -------
        str
            ``127.0.0.1:PORT,...``.
        """
        if listener == "PLAINTEXT":
            return self.bootstrap_servers
        if listener not in _LISTENERS:
            raise EmbeddedBrokerError(f"no listener {listener!r}: choose one of {', '.join(_LISTENERS)} or PLAINTEXT")
        if not self._ports:
            raise EmbeddedBrokerError("the secured Kafka cluster is not started: call start() first")
        return ",".join(f"127.0.0.1:{ports[listener]}" for _, ports in sorted(self._ports.items()))

    def client_certificate(self, name: str) -> IssuedCertificate:
        """A client certificate with ``CN=name`` (principal ``User:name``), issued once per name."""
        if self._ca is None:
            raise EmbeddedBrokerError("the secured Kafka cluster is not started: call start() first")
        if name not in self._client_certificates:
            self._client_certificates[name] = self._ca.issue(name)
        return self._client_certificates[name]

    def client_config(self, mode: str, *, user: str = "alice", password: Optional[str] = None) -> dict[str, str]:
        """librdkafka settings that connect as ``user`` in one of :data:`SECURITY_MODES`.

        Parameters
        ----------
        mode : str
            ``plain``, ``scram-sha-256``, ``scram-sha-512``, ``oauthbearer`` (SASL_PLAINTEXT),
            ``ssl`` (mTLS), ``sasl_ssl-plain``, ``sasl_ssl-scram-sha-512``.
        user : str, default "alice"
            The principal: a :data:`USERS` name for PLAIN and SCRAM, any name for an unsecured
            OAUTHBEARER token or a client certificate.
        password : str, optional
            Overrides the user's password (a wrong one, for tests of failed logins).

        Returns
        -------
        dict of str to str
            ``bootstrap.servers`` of the mode's listener, ``security.protocol`` and the
            mechanism's settings; PEM is inline (``ssl.ca.pem``, ``ssl.certificate.pem``,
            ``ssl.key.pem``), so no file is needed where the client runs.
        """
        if mode not in SECURITY_MODES:
            raise EmbeddedBrokerError(f"unknown security mode {mode!r}: choose one of {', '.join(SECURITY_MODES)}")
        protocol, mechanism = SECURITY_MODES[mode]
        config = {"bootstrap.servers": self.listener_servers(protocol), "security.protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            config["ssl.ca.pem"] = self.ca_pem
        if protocol == "SSL":
            certificate = self.client_certificate(user)
            config["ssl.certificate.pem"] = certificate.certificate_pem
            config["ssl.key.pem"] = certificate.key_pem
        if mechanism == "OAUTHBEARER":
            config.update({
                "sasl.mechanism": mechanism,
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": f"principal={user}",
            })
        elif mechanism is not None:
            if password is None:
                if user not in USERS:
                    raise EmbeddedBrokerError(f"no user {user!r} on this cluster: its users are {', '.join(USERS)}")
                password = USERS[user]
            config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
        return config

    def source_options(self, mode: str, *, user: str = "alice", password: Optional[str] = None) -> dict[str, str]:
        """:meth:`client_config` as ``kafka-group`` (and ``kafka``) source options: each key prefixed ``kafka.``."""
        return {f"kafka.{key}": value for key, value in self.client_config(mode, user=user, password=password).items()}

    def java_options(self, mode: str, *, store_type: str = "JKS", user: str = "alice") -> dict[str, str]:
        """The options a user of Spark's ``format("kafka")`` gives for ``mode``: the Java client's names.

        SASL logins are a ``kafka.sasl.jaas.config`` (``PlainLoginModule``, ``ScramLoginModule``, or
        ``OAuthBearerLoginModule`` with ``unsecuredLoginStringClaim_sub``); TLS trust and client
        certificates are Java stores (``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``,
        ``kafka.ssl.key.password``) made once per type and user in the cluster's folder with the
        JDK's ``keytool``; host name checks are off as Java users turn them off
        (``kafka.ssl.endpoint.identification.algorithm=""``).

        Parameters
        ----------
        mode : str
            One of :data:`SECURITY_MODES`.
        store_type : {"JKS", "PKCS12"}, default "JKS"
            The type of the truststore and keystore (SSL and SASL_SSL modes).
        user : str, default "alice"
            The principal (see :meth:`client_config`).

        Returns
        -------
        dict of str to str
            ``kafka.``-prefixed options, ``kafka.bootstrap.servers`` included.
        """
        if mode not in SECURITY_MODES:
            raise EmbeddedBrokerError(f"unknown security mode {mode!r}: choose one of {', '.join(SECURITY_MODES)}")
        if store_type not in STORE_TYPES:
            raise EmbeddedBrokerError(f"unknown store type {store_type!r}: choose one of {', '.join(STORE_TYPES)}")
        protocol, mechanism = SECURITY_MODES[mode]
        options = {"kafka.bootstrap.servers": self.listener_servers(protocol), "kafka.security.protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            options.update({
                "kafka.ssl.truststore.location": self._truststore(store_type),
                "kafka.ssl.truststore.password": STORE_PASSWORD,
                "kafka.ssl.truststore.type": store_type,
                "kafka.ssl.endpoint.identification.algorithm": "",
            })
        if protocol == "SSL":
            options.update({
                "kafka.ssl.keystore.location": self._keystore(store_type, user),
                "kafka.ssl.keystore.password": STORE_PASSWORD,
                "kafka.ssl.keystore.type": store_type,
                "kafka.ssl.key.password": STORE_PASSWORD,
            })
        if mechanism == "OAUTHBEARER":
            jaas = f'{_OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{user}";'
        elif mechanism is not None:
            if user not in USERS:
                raise EmbeddedBrokerError(f"no user {user!r} on this cluster: its users are {', '.join(USERS)}")
            login = _PLAIN_LOGIN if mechanism == "PLAIN" else _SCRAM_LOGIN
            jaas = f'{login} required username="{user}" password="{USERS[user]}";'
        if mechanism is not None:
            options.update({"kafka.sasl.mechanism": mechanism, "kafka.sasl.jaas.config": jaas})
        return options

    def _truststore(self, store_type: str) -> str:
        """A truststore of ``store_type`` holding the CA (made once)."""
        path = self.folder / f"client-truststore.{store_type.lower()}"
        if not path.exists():
            ca = self.folder / "ca.pem"
            _keytool(["-importcert", "-noprompt", "-alias", "ca", "-file", str(ca),
                      "-keystore", str(path), "-storetype", store_type, "-storepass:env", "STORE_PASSWORD"])
        return str(path)

    def _keystore(self, store_type: str, user: str) -> str:
        """A keystore of ``store_type`` holding ``user``'s client certificate and key (made once per user)."""
        pkcs12 = self.folder / f"client-{user}.p12"
        if not pkcs12.exists():
            pkcs12.write_bytes(self.client_certificate(user).pkcs12(STORE_PASSWORD, self.ca_pem))
        if store_type == "PKCS12":
            return str(pkcs12)
        path = self.folder / f"client-{user}.jks"
        if not path.exists():
            _keytool(["-importkeystore", "-noprompt", "-srckeystore", str(pkcs12), "-srcstoretype", "PKCS12",
                      "-srcstorepass:env", "STORE_PASSWORD", "-destkeystore", str(path), "-deststoretype", "JKS",
                      "-deststorepass:env", "STORE_PASSWORD", "-destkeypass:env", "STORE_PASSWORD"])
        return str(path)

    # -- ACLs ---------------------------------------------------------------------------

    def grant(self, principal: str, *, topic: Optional[str] = None, group: Optional[str] = None,
              operation: str = "READ") -> None:
        """Allow ``principal`` an operation on a topic and/or a group (``"*"``: every one).

        Parameters
        ----------
        principal : str
            ``User:NAME`` (a bare name gets the ``User:`` prefix).
        topic, group : str, optional
            The resources (literal names, or ``"*"``); at least one.
        operation : str, default "READ"
            A Kafka ACL operation (``READ``, ``DESCRIBE``, ``WRITE``, ``ALL``...). READ implies DESCRIBE.
        """
        self._acls(principal, topic, group, operation, allow=True)

    def deny(self, principal: str, *, topic: Optional[str] = None, group: Optional[str] = None,
             operation: str = "READ") -> None:
        """Deny ``principal`` an operation on a topic and/or a group (a DENY ACL wins over any ALLOW)."""
        self._acls(principal, topic, group, operation, allow=False)

    def _acls(self, principal: str, topic: Optional[str], group: Optional[str], operation: str, *, allow: bool) -> None:
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        if topic is None and group is None:
            raise EmbeddedBrokerError("name a topic or a group to grant or deny")
        try:
            acl_operation = AclOperation[operation.upper()]
        except KeyError:
            raise EmbeddedBrokerError(
                f"unknown ACL operation {operation!r}: choose one of {', '.join(op.name for op in AclOperation)}"
            ) from None
        if ":" not in principal:
            principal = f"User:{principal}"
        permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
        bindings = [
            AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", acl_operation, permission)
            for kind, name in ((ResourceType.TOPIC, topic), (ResourceType.GROUP, group)) if name is not None
        ]
        for binding, future in self.admin().create_acls(bindings, request_timeout=30).items():
            self._admin_result(future, f"create ACL {binding}")
        logger.info("%s %s %s on topic %s group %s", "granted" if allow else "denied", principal, operation, topic, group)

    # -- hooks of ApacheKafka -------------------------------------------------------------

    def _prepare(self) -> None:
        self._ca = ThrowawayCA()
        self._client_certificates = {}
        broker = self._ca.issue("broker", hosts=["localhost", "127.0.0.1"])
        (self.folder / "ca.pem").write_text(self._ca.certificate_pem, encoding="utf-8")
        (self.folder / "broker.p12").write_bytes(broker.pkcs12(_STORE_PASSWORD, self._ca.certificate_pem))
        self._ports = {}
        # OAUTHBEARER's validator: Kafka's unsecured one, plus AWS MSK IAM signed URLs (their form only).
        assert self._classpath is not None
        classes = compile_validator(self.folder / "msk-iam-validator", self._classpath)
        self._classpath = f"{self._classpath}{os.pathsep}{classes}"

    def _node_settings(self, node: _Node) -> dict[str, str]:
        ports = self._ports.setdefault(node.node_id, {listener: _free_port() for listener in _LISTENERS})
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        users = " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},{listeners},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},{listeners}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:admin;User:ANONYMOUS",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.folder / "broker.p12"),
            "ssl.keystore.password": _STORE_PASSWORD,
            "ssl.key.password": _STORE_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.folder / "ca.pem"),
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
        }
        for listener in ("sasl_plaintext", "sasl_ssl"):
            prefix = f"listener.name.{listener}"
            settings.update({
                f"{prefix}.plain.sasl.jaas.config":
                    f'{_PLAIN_LOGIN} required username="admin" password="{USERS["admin"]}" {users};',
                f"{prefix}.scram-sha-256.sasl.jaas.config": f"{_SCRAM_LOGIN} required;",
                f"{prefix}.scram-sha-512.sasl.jaas.config": f"{_SCRAM_LOGIN} required;",
                f"{prefix}.oauthbearer.sasl.jaas.config": f'{_OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="admin";',
                f"{prefix}.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS,
            })
        return settings

    def _format_arguments(self) -> list[str]:
        arguments = []
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for name, password in USERS.items():
                arguments += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        return arguments

    def start(self) -> "SecuredKafka":
        """Start the cluster (see :meth:`ApacheKafka.start`), then let ``User:alice`` read every topic and group.

        Returns
        -------
        SecuredKafka
            ``self``.
        """
        super().start()
        try:
            self.grant("alice", topic="*", group="*")
        except BaseException:
            self.stop()
            raise
        logger.info("secured listeners: %s", {name: self.listener_servers(name) for name in _LISTENERS})
        return self

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self._nodes else "not started"
        return f"SecuredKafka(brokers={self._brokers}, {state})"


def _keytool(arguments: list[str]) -> None:
    """Run the JDK's ``keytool`` (``$JAVA_HOME/bin/keytool``, else on the PATH); the store password
    reaches it through its environment (``STORE_PASSWORD``)."""
    java_home = os.environ.get("JAVA_HOME")
    keytool = os.path.join(java_home, "bin", "keytool") if java_home else shutil.which("keytool")
    if not keytool or not os.path.exists(keytool):
        raise EmbeddedBrokerError("Java's keytool was not found (set JAVA_HOME or put keytool on the PATH)")
    done = subprocess.run([keytool, *arguments], env={**os.environ, "STORE_PASSWORD": STORE_PASSWORD},
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise EmbeddedBrokerError(f"keytool {arguments[0]} failed: {done.stdout}{done.stderr}")
