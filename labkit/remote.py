"""The attendee's side of `labkit serve`: one GPU box measures for a room of laptops.

    labkit.connect("tls://gpu-box:8786", "TOKEN", name="Ada")    # or LABKIT_SERVER / LABKIT_TOKEN / LABKIT_NAME

After that, labkit.bench, labkit.inline (the kernel's source travels; the box builds it), the
explorer's live mode and the labs' cells measure on the box, and the rows come back here.

* **Access**: Dask has no token login, so the token is turned into Dask's own TLS security: a key
  is derived from it (scrypt, then an Ed25519 key and a self-signed certificate, the same bytes on
  every machine that knows the token), and the scheduler, its workers and every client require the
  peer's certificate to be that one (mutual TLS, `distributed.Security`). A client without the token
  fails the handshake before it can send anything; the traffic is encrypted.
* **Requests**: each group of configurations (a torch baseline and the variants compared with it) is
  one request, sent as plain data (no pickles) into the server's inbox, a distributed.Queue. The
  server queues requests per attendee, round-robin (labkit.serve); rows, errors and the end of each
  request come back through this client's own Queue (named after the Dask client: the server drops
  it when the client is gone, closed or not); its place in line and expected wait through a
  distributed.Variable the server updates. Queues are read without waiting on the scheduler (a get
  that times out there is logged, traceback and all, by the scheduler).
"""
from __future__ import annotations

import dataclasses
import datetime
import getpass
import hashlib
import os
import sys
import time
import uuid
from pathlib import Path

from .config import make_rule, resolve
from .errors import ConfigError, LabkitError
from .inline_kernel import check_name as check_variant_name, from_text
from .registry import get_op

SERVER_ENV, TOKEN_ENV, NAME_ENV = "LABKIT_SERVER", "LABKIT_TOKEN", "LABKIT_NAME"
INBOX = "labkit-serve-inbox"        # Queue: requests and cancellations from every attendee
INFO = "labkit-serve-info"          # Variable: {"gpus": [...], "board": url, "request_budget_s": ...}
PLACES = "labkit-serve-places"      # Variable: {reply queue: {request: [place, expected wait s]}}
REPLY = "labkit-reply-"             # Queue REPLY + a client's id: what comes back for that client's requests
MIN_TOKEN = 16
CONNECT_TIMEOUT_S = 20
POLL_S = (0.05, 0.4)                # an empty reply queue is read again after this, doubling while it stays empty
STATUS_S = 0.5                      # the place in line is asked for at most this often


def check_token(token) -> str:
    if not isinstance(token, str) or len(token) < MIN_TOKEN:
        raise ConfigError(f"the serve token must be a string of at least {MIN_TOKEN} characters (the TLS key is "
                          f"derived from it: a short one could be guessed); set {TOKEN_ENV} or pass it")
    return token


def check_name(name) -> str:
    """An attendee's name as they choose it: 1-40 printable characters (the board escapes it)."""
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 40 or not name.isprintable():
        raise ConfigError(f"an attendee name is 1 to 40 printable characters, got {name!r}")
    return name.strip()


def security(token: str):
    """The distributed.Security of everyone who knows `token` (see the module docstring)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.x509.oid import NameOID
    from distributed import Security

    # scrypt makes each guess of a weak token cost ~50 ms and 16 MiB
    seed = hashlib.scrypt(check_token(token).encode(), salt=b"labkit serve v1", n=2**14, r=8, p=1, dklen=32)
    key = Ed25519PrivateKey.from_private_bytes(seed)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit serve")])
    # fixed serial and dates, and Ed25519's deterministic signature: the same certificate everywhere
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(int.from_bytes(hashlib.sha256(seed).digest()[:16], "big") >> 1)
            .not_valid_before(datetime.datetime(2024, 1, 1)).not_valid_after(datetime.datetime(2124, 1, 1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, None))
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    k = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode()
    return Security(require_encryption=True, tls_ca_file=pem, tls_client_cert=pem, tls_client_key=k,
                    tls_scheduler_cert=pem, tls_scheduler_key=k, tls_worker_cert=pem, tls_worker_key=k)


# ---- configurations as plain data -----------------------------------------------------------------
def encode(cfg) -> dict:
    """A Config as plain data; an inline variant carries its rendered source text."""
    v = cfg.variant
    out = {"op": cfg.op, "variant": v.name, "dtype": v.dtype, "shape": list(cfg.shape), "mode": cfg.mode,
           "offset": cfg.offset, "rule": dataclasses.asdict(cfg.rule), "timed": cfg.timed,
           "axes": [list(a) for a in cfg.axes]}
    if v.is_inline:
        out["inline"] = {"text": Path(v.source).read_text(), "width": v.width, "note": v.note}
    return out


def decode(d: dict, budget_s: float | None = None):
    """The Config of encode()'s data, checked as any Config is (config.resolve); an inline source is
    written into this machine's build cache. `budget_s` caps the sampling budget."""
    try:
        rule = make_rule(dict(d["rule"]))
        if budget_s is not None:
            rule = dataclasses.replace(rule, budget_s=min(rule.budget_s, budget_s))
        variant, inl = d["variant"], d.get("inline")
        if inl is not None:
            op = get_op(d["op"])
            check_variant_name(op, variant)
            op.check_dtype(d["dtype"])
            variant = from_text(op, variant, d["dtype"], int(inl["width"]), str(inl["note"]), str(inl["text"]))
        return resolve(d["op"], variant, d["dtype"], d["shape"], d["mode"], int(d["offset"]), rule, bool(d["timed"]),
                       axes=tuple(tuple(a) for a in d["axes"]) or None)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"a malformed request ({type(e).__name__}: {e}); attendee and server must run the same "
                          "labkit") from None


# ---- the executor -----------------------------------------------------------------------------------
class ServeExecutor:
    """An executor of labkit.session.run that measures on a `labkit serve` box."""

    shared = True  # the connection outlives one run: session.run leaves it open

    def __init__(self, address: str, token: str, name: str, timeout_s: float = CONNECT_TIMEOUT_S, status=None):
        from distributed import Client, Queue, Variable

        self.name = check_name(name)
        if not isinstance(address, str) or not address.startswith("tls://"):
            raise ConfigError(f"a labkit serve address looks like tls://HOST:8786 (`labkit serve` prints it), got {address!r}")
        self.address, self.status = address, status
        sec = security(token)
        try:
            self.client = Client(address, security=sec, timeout=timeout_s, name=f"labkit attendee {self.name}")
        except Exception as e:  # noqa: BLE001 - Dask raises OSError, TimeoutError or its CommClosedError
            if "certificate" in str(e).lower() or "ssl" in str(e).lower():
                raise LabkitError(f"labkit serve at {address} refused this token (its TLS certificate is derived from "
                                  f"the token, and the two do not match): check the token ({type(e).__name__})") from None
            raise LabkitError(f"cannot reach labkit serve at {address} in {timeout_s:.0f} s: {type(e).__name__}: {e}") from None
        try:
            self.info = Variable(INFO, client=self.client).get(timeout=timeout_s)
        except TimeoutError:
            self.client.close()
            raise LabkitError(f"{address} is a Dask scheduler with this token, but no labkit serve answers there") from None
        self.reply = f"{REPLY}{self.client.id}"
        self._q, self._inbox = Queue(self.reply, client=self.client), Queue(INBOX, client=self.client)
        self._places = Variable(PLACES, client=self.client)
        self._idle_s, self._shown = POLL_S[0], (0.0, "")

    def gpus(self) -> list:
        return list(range(len(self.info["gpus"])))

    def identities(self) -> list:
        return [{"gpu": g, "gpu_index": i} for i, g in enumerate(self.info["gpus"])]

    def run_all(self, title, groups):
        """Send one request per group, yield the rows as they come back (each with `turnaround_s`,
        seconds from sending its request to its arrival here)."""
        sent: dict = {}
        for g in groups:
            rid = uuid.uuid4().hex[:12]
            sent[rid] = time.monotonic()
            self._inbox.put({"kind": "request", "id": rid, "attendee": self.name, "client": self.client.id,
                             "reply": self.reply, "title": title, "configs": [encode(c) for c in g]})
        show = self.status or _Status()
        try:
            while sent:
                for item in self._receive():
                    rid = item.get("request")
                    if rid not in sent:  # an earlier, interrupted run's request
                        continue
                    if item["kind"] == "row":
                        yield dict(item["row"], turnaround_s=time.monotonic() - sent[rid])
                    elif item["kind"] == "done":
                        del sent[rid]
                    elif item["kind"] == "error":
                        del sent[rid]
                        raise (ConfigError if item["error"] == "ConfigError" else LabkitError)(item["message"])
                if sent and time.monotonic() - self._shown[0] >= STATUS_S:
                    self._shown = (time.monotonic(), self._where(sent))
                    show(self._shown[1])
        finally:
            if sent:  # Ctrl-C or an error: the server drops what has not started
                self._inbox.put({"kind": "cancel", "client": self.client.id, "requests": list(sent)})

    def _receive(self) -> list:
        got = self._q.get(batch=True)
        if got:
            self._idle_s = POLL_S[0]
        else:
            time.sleep(self._idle_s)
            self._idle_s = min(POLL_S[1], 2 * self._idle_s)
        return got

    def _where(self, sent) -> str:
        """'labkit serve: 2 requests waiting; the next is 3rd in line, about 4 s' or 'running'."""
        try:
            mine = self._places.get(timeout=STATUS_S).get(self.reply, {})
        except TimeoutError:
            mine = {}
        waiting = [mine[r] for r in sent if r in mine]
        if not waiting:
            return f"labkit serve: running on {self.address} ({len(sent)} request{'s' * (len(sent) > 1)} left)"
        place, eta = min(waiting)
        return (f"labkit serve: {len(waiting)} request{'s' * (len(waiting) > 1)} waiting; the next is "
                f"{_ordinal(place)} in line, expected wait about {eta:.0f} s")

    def close(self) -> None:
        for q in (self._q, self._inbox):
            q.close()
        self.client.close()


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class _Status:
    """One line that says where the requests are: updated in place in a notebook, printed on change
    elsewhere."""

    def __init__(self):
        self._last, self._handle = None, None

    def __call__(self, text: str) -> None:
        if text == self._last:
            return
        self._last = text
        shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
        if shell is not None and hasattr(shell, "kernel"):
            from IPython.display import display

            if self._handle is None:
                self._handle = display({"text/plain": text}, raw=True, display_id=True)
            else:
                self._handle.update({"text/plain": text}, raw=True)
        else:
            print(text, file=sys.stderr)


# ---- the session's connection -------------------------------------------------------------------------
_conn: dict = {}


def connect(address: str | None = None, token: str | None = None, name: str | None = None) -> ServeExecutor:
    """Measure on the `labkit serve` box at `address` from now on (see the module docstring)."""
    address = address or os.environ.get(SERVER_ENV)
    token = token or os.environ.get(TOKEN_ENV)
    if not address or not token:
        raise ConfigError(f"labkit.connect needs the server's address and token (or {SERVER_ENV} and {TOKEN_ENV}); "
                          "`labkit serve` prints both")
    disconnect()
    ex = _conn["ex"] = ServeExecutor(address, token, name or os.environ.get(NAME_ENV) or getpass.getuser())
    gpus = ", ".join(ex.info["gpus"])
    print(f"connected to labkit serve at {address} as {ex.name!r}: {len(ex.info['gpus'])} GPU worker(s) ({gpus}); "
          f"the room's board: {ex.info.get('board') or 'none'}")
    return ex


def connected() -> ServeExecutor | None:
    """The session's server connection; made on first use when LABKIT_SERVER is set."""
    if "ex" not in _conn and os.environ.get(SERVER_ENV):
        connect()
    return _conn.get("ex")


def disconnect() -> None:
    ex = _conn.pop("ex", None)
    if ex is not None:
        ex.close()
