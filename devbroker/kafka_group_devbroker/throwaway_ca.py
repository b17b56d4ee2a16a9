"""A throwaway certificate authority for the secured development cluster (never for production).

:class:`ThrowawayCA` makes a fresh CA key and certificate in memory and issues
leaf certificates from it: the broker's (its names are ``localhost`` and the
address ``127.0.0.1``, so clients verify the host name) and clients' (mTLS; the
principal Kafka derives from the ``CN``). The broker gets a PKCS#12 keystore
(:meth:`IssuedCertificate.pkcs12`) and the CA as a PEM truststore; librdkafka
clients get PEM text (``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``).

Keys are EC P-256 (fast to make, accepted by Java and OpenSSL); certificates are
valid from an hour ago for two days. Uses the ``cryptography`` package.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Sequence

__all__ = ["IssuedCertificate", "ThrowawayCA"]

_VALID_FOR = datetime.timedelta(days=2)
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class IssuedCertificate:
    """A leaf certificate and its private key, as PEM text.

    Attributes
    ----------
    common_name : str
        The certificate's subject ``CN``.
    certificate_pem : str
        The certificate (PEM).
    key_pem : str
        Its private key, unencrypted PKCS#8 (PEM).
    """

    common_name: str
    certificate_pem: str
    key_pem: str

    def pkcs12(self, password: str, ca_pem: str) -> bytes:
        """A PKCS#12 keystore holding the key, the certificate and the CA (a Java ``ssl.keystore``).

        Parameters
        ----------
        password : str
            The store's (and the key's) password.
        ca_pem : str
            The issuing CA's certificate, added to the chain.

        Returns
        -------
        bytes
            The keystore, PBES2/AES encrypted.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        certificate = x509.load_pem_x509_certificate(self.certificate_pem.encode())
        ca = x509.load_pem_x509_certificate(ca_pem.encode())
        return pkcs12.serialize_key_and_certificates(
            self.common_name.encode(), key, certificate, [ca],  # type: ignore[arg-type]  # an EC key is a PKCS12 key
            serialization.BestAvailableEncryption(password.encode()),
        )


class ThrowawayCA:
    """A certificate authority made in memory, for one development cluster.

    Parameters
    ----------
    name : str, default "kafka-group throwaway CA"
        The CA's ``CN``.

    Examples
    --------
    >>> ca = ThrowawayCA()
    >>> broker = ca.issue("broker", hosts=["localhost", "127.0.0.1"])
    >>> client = ca.issue("alice")
    >>> ca.certificate_pem.startswith("-----BEGIN CERTIFICATE-----")
    True
    """

    def __init__(self, name: str = "kafka-group throwaway CA") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._certificate = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self._pem = self._certificate.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def certificate_pem(self) -> str:
        """str : The CA certificate (PEM): clients' ``ssl.ca.pem``, the broker's PEM truststore."""
        return self._pem

    def issue(self, common_name: str, *, hosts: Sequence[str] = ()) -> IssuedCertificate:
        """Issue a leaf certificate for a server (``hosts`` given) or a client.

        Parameters
        ----------
        common_name : str
            The subject ``CN`` (for a client: the principal name, with the cluster's mapping rule).
        hosts : sequence of str, optional
            Subject alternative names: host names, or IP addresses (written as such).

        Returns
        -------
        IssuedCertificate
            The certificate and a fresh key.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return IssuedCertificate(
            common_name=common_name,
            certificate_pem=certificate.public_bytes(serialization.Encoding.PEM).decode(),
            key_pem=key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode(),
        )
