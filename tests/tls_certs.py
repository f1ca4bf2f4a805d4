"""A throw-away TLS identity for tests: a self-signed certificate that is its own CA."""

from __future__ import annotations

import datetime
from pathlib import Path


def write_cluster_cert(folder: Path) -> dict[str, str]:
    """A self-signed certificate that is its own CA, as Dask's Security.temporary makes."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "monarch-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cluster.crt", folder / "cluster.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return {
        "MONARCH_ENABLE_TLS": "1",
        "MONARCH_TLS_CA_FILE": str(cert_path),
        "MONARCH_TLS_CERT_FILE": str(cert_path),
        "MONARCH_TLS_KEY_FILE": str(key_path),
    }
