"""A TCP proxy on 127.0.0.1 whose traffic a test can hold: a network that stops answering
without closing anything (a partition, a stalled NAT), then heals. While held, bytes in
either direction wait in the proxy; released, they flow on in order, as TCP delivers them
once a partition heals. Nothing is refused or reset, so clients see only silence."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

POLL_SECONDS = 0.02


class HeldNetwork:
    """Forwards connections on `port` to `upstream` until closed; `hold` and `release`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_SECONDS)  # a blocked accept() outlives a close()
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()  # set: traffic flows
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._guard = threading.Lock()
        self._spawn(self._accept)

    def hold(self) -> None:
        """From now on, nothing goes through (what is in flight waits)."""
        self._open.clear()

    def release(self) -> None:
        """What waited, and everything after it, goes through."""
        self._open.set()

    def close(self) -> None:
        """Close the listener and every connection; wait for the proxy's threads."""
        self._closed.set()
        self._open.set()
        self._listener.close()
        with self._guard:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> HeldNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals -------------------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._guard:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            client.settimeout(None)
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                client.close()
                continue
            with self._guard:
                self._sockets += [client, server]
            self._spawn(self._pump, client, server)
            self._spawn(self._pump, server, client)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            for data in self._chunks(source):
                while not self._open.wait(POLL_SECONDS):
                    if self._closed.is_set():
                        return
                target.sendall(data)
            target.shutdown(socket.SHUT_WR)  # the source closed: pass the end on

    @staticmethod
    def _chunks(source: socket.socket) -> Iterator[bytes]:
        while data := source.recv(65536):
            yield data
