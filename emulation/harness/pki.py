"""A throwaway PKI for tests and emulations (the ``openssl`` command line, as the security
page shows it): a CA, the controller's certificate for its address, client certificates
named by host, the admin token, the host secret and each host's credential, in one folder.
"""
from __future__ import annotations

import os
import subprocess

from controller.service.credentials import host_credential

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(folder: str, *args) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def make_pki(folder: str, server_ip: str, client_hosts=(), credential_hosts=()) -> dict:
    """Files under ``folder``: ``ca.pem``, ``server.pem``/``server.key`` (its subject
    alternative name ``server_ip``), ``HOST.pem``/``HOST.key`` per client host, ``admin.token``,
    ``host.secrets`` and ``HOST.credential`` per credential host. Returns their paths by name
(``ca``, ``cert``, ``key``, ``token``, ``secrets``, ``HOST_cert`` and ``HOST_key``)."""
    os.makedirs(folder, exist_ok=True)
    # the extensions strict verification asks for (Python 3.13's default context): a CA with
    # its key usage, certificates naming their issuer's key and their own uses
    _openssl(folder, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=mlroute test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    leaf = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth,clientAuth\nsubjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid,issuer\n")
    with open(os.path.join(folder, "server.ext"), "w") as fh:
        fh.write(leaf + f"subjectAltName=IP:{server_ip}\n")
    with open(os.path.join(folder, "client.ext"), "w") as fh:
        fh.write(leaf)
    for name in ("server", *client_hosts):
        _openssl(folder, "req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                 f"/CN={server_ip if name == 'server' else name}")
        _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey",
                 "ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile",
                 "server.ext" if name == "server" else "client.ext")
    secret = os.urandom(24).hex()
    out = {"ca": "ca.pem", "cert": "server.pem", "key": "server.key",
           "token": "admin.token", "secrets": "host.secrets",
           **{f"{h}_cert": f"{h}.pem" for h in client_hosts},
           **{f"{h}_key": f"{h}.key" for h in client_hosts}}
    files = {"admin.token": os.urandom(16).hex(), "host.secrets": secret}
    for h in credential_hosts:
        files[f"{h}.credential"] = host_credential(secret.encode(), h)
    for name, text in files.items():
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
    return {k: os.path.join(folder, v) for k, v in out.items()}
