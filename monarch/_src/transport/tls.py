"""Mutual TLS for every connection, through Dask's `Security`, switched on by configuration.

With `enable_tls` set, every proc listens on `tls://` and both ends of every connection present
a certificate signed by the configured CA (`tls_ca_file`, `tls_cert_file`, `tls_key_file`);
Dask's `Security` builds the SSL contexts (CERT_REQUIRED both ways). A peer without such a
certificate fails the handshake: the connection is refused and Dask logs it, and nothing it sent
reaches a mailbox. The configuration travels to procs with the rest of the runtime settings.

Without TLS, anyone who can reach a proc's port can make it unpickle data: TLS is the answer where
that matters. TLS connections keep Dask's tornado stream (`dask_comm.py`); plain tcp and unix
sockets use the raw `SocketChannel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monarch._src.config import get as config_get

if TYPE_CHECKING:
    import ssl

__all__ = ["listen_scheme", "ssl_contexts", "tls_args", "tls_enabled"]


def _security(**kwargs: Any) -> Any:
    """Dask's `Security` (untyped), imported when TLS is first set up."""
    from distributed.security import Security

    return Security(**kwargs)  # type: ignore[no-untyped-call]  # Dask ships it untyped


def tls_enabled() -> bool:
    """TLS is on: `enable_tls`, or `default_transport` is `Tls` or a 'tls://' address."""
    if config_get("enable_tls"):
        return True
    transport = config_get("default_transport")
    if isinstance(transport, str):
        return transport.lower().startswith("tls://")
    value: object = transport.value  # a `ChannelTransport` member
    return value == "tls"


def tls_args() -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(connection args, listen args) for `distributed.comm`, or None without TLS."""
    if not tls_enabled():
        return None
    ca, cert, key = _tls_files()
    security = _security(
        require_encryption=True,
        tls_ca_file=ca,
        tls_worker_cert=cert,
        tls_worker_key=key,
    )
    return security.get_connection_args("worker"), security.get_listen_args("worker")


def ssl_contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) stdlib SSL contexts of the same mutual TLS, for the servers that are not
    Dask comms (the control server and its CLI): each end presents the configured certificate
    and requires one signed by the CA. Peers are identified by certificate, not host name."""
    import ssl

    ca, cert, key = _tls_files()
    contexts = []
    for purpose in (ssl.Purpose.CLIENT_AUTH, ssl.Purpose.SERVER_AUTH):
        context = ssl.create_default_context(purpose, cafile=ca)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(cert, key)
        contexts.append(context)
    return contexts[0], contexts[1]


def _tls_files() -> tuple[str, str, str]:
    """The CA, certificate and key files; ValueError naming the ones not configured."""
    ca, cert, key = (str(config_get(k)) for k in ("tls_ca_file", "tls_cert_file", "tls_key_file"))
    missing = [name for name, value in
               (("tls_ca_file", ca), ("tls_cert_file", cert), ("tls_key_file", key)) if not value]
    if missing:
        names = " and ".join(filter(None, [", ".join(missing[:-1]), missing[-1]]))
        raise ValueError(
            f"TLS is on (enable_tls, or the Tls transport) but {names} "
            f"{'is' if len(missing) == 1 else 'are'} not set: configure the CA, the certificate "
            "and its key (monarch.configure(...) or MONARCH_TLS_* variables)."
        )
    return ca, cert, key


def listen_scheme() -> str:
    return "tls" if tls_enabled() else "tcp"
