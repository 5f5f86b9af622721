"""Who may use the REST server and how it is reached: the credentials' policy and the TLS
context from the controller's options, the host a client certificate names, and enough file
descriptors for every agent's watch (``rest.py`` serves; ``service/credentials.py`` decides).
"""
from __future__ import annotations

import logging

from controller.errors import InputError
from controller.service import credentials
from controller.shell.bridge import original

LOG = logging.getLogger("mlroute")


def more_files() -> None:
    """Raise the soft limit of open files to the hard one: every agent's watch holds a
    connection (8,192 agents at k = 32), and the usual soft limit is 1,024."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # not on this platform, or not allowed
        pass


def rest_security(conf, token: str | None, native: bool):
    """(policy, TLS context or None) from the options (``flags.py``), checked: host secrets
    need an admin token (else nobody could declare a job), a certificate needs its key. Says
    at start what is open."""
    get = lambda name: getattr(conf, name, None)  # noqa: E731 - older configs lack them
    secrets = []
    if get("mlroute_host_secret_file"):
        try:
            secrets = credentials.read_secrets(get("mlroute_host_secret_file"))
        except ValueError as e:
            raise InputError(f"--mlroute-host-secret-file: {e}") from None
        if not token:
            raise InputError("--mlroute-host-secret-file needs an admin token too "
                             "(--mlroute-token-file): hosts' credentials do not declare jobs")
    cert, key, client_ca = get("mlroute_tls_cert"), get("mlroute_tls_key"), \
        get("mlroute_tls_client_ca")
    if bool(cert) != bool(key) or (client_ca and not cert):
        raise InputError("TLS needs --mlroute-tls-cert and --mlroute-tls-key together "
                         "(and --mlroute-tls-client-ca only with them)")
    policy = credentials.Policy(admin_token=token, host_secrets=tuple(secrets),
                                client_certificates=bool(client_ca),
                                open_health=get("mlroute_rest_open_health") is not False)
    tls = tls_context(cert, key, client_ca, native) if cert else None
    if not policy.closed:
        LOG.warning("mlroute: REST has no credential configured: every caller may read and "
                    "write (fine on the loopback for a demo; see docs/howto/security.md)")
    elif not policy.per_host:
        LOG.warning("mlroute: REST has one admin token and no host credentials: every "
                    "agent must hold the admin token (--mlroute-host-secret-file)")
    if tls is None:
        LOG.info("mlroute: REST is plain HTTP (--mlroute-tls-cert for HTTPS)")
    return policy, tls


def cert_host(conn) -> str | None:
    """The host a verified client certificate names (its subject's common name), if any."""
    getpeercert = getattr(conn, "getpeercert", None)
    if getpeercert is None:
        return None
    try:
        cert = getpeercert()
    except ValueError:  # no handshake done
        return None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


def tls_context(cert_file: str, key_file: str, client_ca: str | None = None,
                native: bool = False):
    """The server's TLS context: its certificate and key; with ``client_ca``, clients may
    present a certificate signed by it (its common name is the host it speaks for), checked
    when given. ``native``: the unpatched ``ssl`` (the front's threads are OS threads)."""
    ssl = original("ssl") if native else __import__("ssl")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert_file, key_file)
        if client_ca:
            ctx.load_verify_locations(client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as e:
        raise InputError(f"TLS: cannot load {cert_file}, {key_file}"
                         f"{', ' + client_ca if client_ca else ''}: {e}") from None
    return ctx
