"""Who a REST request speaks for, and what it may do: the admin (the operator's token), one
host (its agent), or nobody.

Why per-host credentials: an agent runs on every host, and a host that holds the admin token
can declare jobs, replace the fabric and report probes for every other host. As Kubernetes'
Node authorizer does for kubelets, a host credential reads and writes only its own objects
(``/v1/hosts/{its name}/...``). A host credential is an HMAC of the host's name under a
cluster secret (``mlroute agent-credential HOST``), so the controller checks it with no table
per host; a host's name in a client certificate (mutual TLS, ``--mlroute-tls-client-ca``)
names the host the same way. Several secrets verify (the first one issues): rotation adds the
new secret first, re-issues the agents' credentials, then drops the old one.

>>> secrets = [b"s3cret"]
>>> cred = host_credential(secrets[0], "h0_0")
>>> cred.split(".")[0], cred.endswith(".h0_0")
('mlh1', True)
>>> who(f"Bearer {cred}", None, secrets)
Principal(kind='host', host='h0_0')
>>> policy = Policy(admin_token="t", host_secrets=secrets)
>>> decide(policy, Principal("host", "h0_0"), "POST", "post_probes", {"host": "h1_0"})
(403, "host 'h0_0' may not act for host 'h1_0' (a host credential reads and writes only /v1/hosts/h0_0/...)")
>>> decide(policy, Principal("host", "h0_0"), "POST", "post_probes", {"host": "h0_0"}) is None
True
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

VERSION = "mlh1"  # a host credential's first field: its format
HOST_ROUTES = ("get_segments", "post_probes", "post_ports", "post_traffic")  # /v1/hosts/{host}
HEALTH_ROUTES = ("get_ready", "get_openapi")  # open to anyone with --mlroute-rest-open-health
MAX_HOST_NAME = 255


@dataclass(frozen=True)
class Principal:
    kind: str  # "admin", "host" or "anonymous"
    host: str | None = None


ANONYMOUS = Principal("anonymous")
ADMIN = Principal("admin")


@dataclass(frozen=True)
class Policy:
    """What the controller was configured with: the admin token, the host secrets (the first
    issues), whether client certificates name hosts, and what stays open."""
    admin_token: str | None = None
    host_secrets: tuple | list = ()
    client_certificates: bool = False
    open_health: bool = True  # GET /v1/ready, /v1/openapi.json and /metrics need nothing

    @property
    def closed(self) -> bool:
        """Whether any credential is configured (else every caller may do everything)."""
        return bool(self.admin_token or self.host_secrets or self.client_certificates)

    @property
    def per_host(self) -> bool:
        """Whether hosts have their own credentials (then the admin reports for no host)."""
        return bool(self.host_secrets or self.client_certificates)


def _mac(secret: bytes, host: str) -> str:
    digest = hmac.new(secret, b"mlroute-host:" + host.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def host_credential(secret: bytes, host: str) -> str:
    """The bearer credential of ``host`` under ``secret``: ``mlh1.<mac>.<host>``."""
    check_host_name(host)
    return f"{VERSION}.{_mac(secret, host)}.{host}"


def check_host_name(host) -> str:
    """A host name a credential may carry: printable ASCII, no space, at most 255 bytes."""
    if not isinstance(host, str) or not host or len(host) > MAX_HOST_NAME or \
            not all(33 <= ord(c) < 127 for c in host):
        raise ValueError(f"host name {host!r}: 1 to {MAX_HOST_NAME} printable ASCII "
                         "characters, no space")
    return host


def read_secrets(path: str) -> list[bytes]:
    """The host secrets of ``path``: one per line (blank lines and ``#`` comments skipped),
    the first issues credentials, every one verifies. Raises ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line.strip() for line in fh]
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"host secret file {path}: {e}") from None
    secrets = [line.encode() for line in lines if line and not line.startswith("#")]
    if not secrets:
        raise ValueError(f"host secret file {path}: no secret in it")
    short = [i for i, s in enumerate(secrets) if len(s) < 16]
    if short:
        raise ValueError(f"host secret file {path}: secret {short[0] + 1} is shorter than 16 "
                         "characters (make one with: head -c 32 /dev/urandom | base64)")
    return secrets


def who(authorization: str | None, cert_host: str | None, host_secrets,
        admin_token: str | None = None) -> Principal | None:
    """The principal of a request: its bearer credential (the admin token, or a host's
    credential under one of ``host_secrets``), else the host its verified client certificate
    names; ANONYMOUS without either; None for a credential that is given and wrong (401), or
    that names another host than the certificate."""
    header = authorization or ""
    if not header:
        return Principal("host", cert_host) if cert_host else ANONYMOUS
    # headers arrive decoded as latin-1: back to their bytes, compared in constant time
    raw = header.encode("latin-1", "replace")
    if not raw.startswith(b"Bearer "):
        return None
    given = raw[len(b"Bearer "):].strip()
    if admin_token and hmac.compare_digest(given, admin_token.encode()):
        return ADMIN if not cert_host else None
    parts = given.split(b".", 2)
    if len(parts) != 3 or parts[0] != VERSION.encode():
        return None
    try:
        host = parts[2].decode("ascii")
        check_host_name(host)
    except (UnicodeDecodeError, ValueError):
        return None
    if cert_host and cert_host != host:
        return None
    ok = False
    for secret in host_secrets:  # every secret is tried: the time does not say which matched
        ok |= hmac.compare_digest(parts[1], _mac(secret, host).encode())
    return Principal("host", host) if ok else None


def decide(policy: Policy, principal: Principal | None, method: str, route: str | None,
           params: dict) -> tuple[int, str] | None:
    """None when ``principal`` may call ``route`` (the dispatcher's name, ``params`` its path
    parameters; None for a path outside /v1 such as /metrics), else (401 or 403, why)."""
    if not policy.closed or route is None:  # nothing served there: its 404 says nothing
        return None
    if principal is None:
        return 401, ("the credential given is not valid here (a host's: mlroute "
                     "agent-credential HOST; the admin's: --mlroute-token)")
    health = route in HEALTH_ROUTES or route == "metrics"
    if health and policy.open_health and method in ("GET", "HEAD"):
        return None
    if principal.kind == "anonymous":
        return 401, ("this controller needs 'Authorization: Bearer <credential>' (the admin "
                     "token, or a host's credential from mlroute agent-credential HOST)")
    if principal.kind == "admin":
        if route in HOST_ROUTES and method != "GET" and policy.per_host:
            return 403, ("the admin credential does not report for hosts: each host's agent "
                         "reports with its own credential (mlroute agent-credential HOST)")
        return None
    host = principal.host
    if route in HOST_ROUTES:
        if params.get("host") == host:
            return None
        return 403, (f"host {host!r} may not act for host {params.get('host')!r} (a host "
                     f"credential reads and writes only /v1/hosts/{host}/...)")
    if health:
        return None
    return 403, (f"a host credential ({host!r}) reads and writes only /v1/hosts/{host}/...; "
                 "jobs, the fabric and plans need the admin token")


def authority(method: str, route: str) -> str:
    """Who may call ``route`` once credentials are configured (the REST reference's column,
    generated from here so that it says what ``decide`` does)."""
    if route in HEALTH_ROUTES or route == "metrics":
        return "anyone (with --mlroute-rest-open-health, the default); else any credential"
    if route in HOST_ROUTES:
        if method == "GET":
            return "the host itself, or the admin"
        return "the host itself (the admin only where hosts have no credentials of their own)"
    return "the admin"
