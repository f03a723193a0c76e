"""A loopback TCP proxy whose open connections can be frozen: they stay open but pass no byte, as a stalled
network path or a hung load balancer does. Connections made after the freeze pass normally. With
``send_delay`` it holds each chunk a client sends that long (a slow cluster); answers pass at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


class FreezableProxy:
    def __init__(self, target_host: str, target_port: int, send_delay: float = 0.0) -> None:
        self.target = (target_host, target_port)
        self.send_delay = send_delay
        self.port = 0
        self.connections = 0  # accepted so far: what a client behind the proxy asked of the target
        self._loop = asyncio.new_event_loop()
        self._frozen: set[asyncio.Event] = set()
        self._live: set[asyncio.Event] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        frozen = asyncio.Event()
        self._live.add(frozen)
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay: float) -> None:
            with suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if delay:
                        await asyncio.sleep(delay)
                    if frozen.is_set():
                        await asyncio.Event().wait()  # hold the bytes for ever; the socket stays open
                    dst.write(data)
                    await dst.drain()
            with suppress(Exception):
                dst.close()

        await asyncio.gather(pump(reader, up_writer, self.send_delay), pump(up_reader, writer, 0.0))
        self._live.discard(frozen)

    def freeze_open_connections(self) -> int:
        """Stop every open connection from passing data (without closing it); returns how many."""

        def freeze() -> int:
            for flag in self._live:
                flag.set()
            return len(self._live)

        return asyncio.run_coroutine_threadsafe(_call(freeze), self._loop).result(5)

    @contextmanager
    def running(self) -> Iterator[FreezableProxy]:
        self._thread.start()
        self._ready.wait(5)
        try:
            yield self
        finally:
            with suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_others(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


async def _call(fn: object) -> int:
    return fn()  # type: ignore[operator,no-any-return]


async def _cancel_others() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def kubeconfig_through(proxy: FreezableProxy, kubeconfig: Path, target_port: int, out: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is the proxy (the apiserver's certificate names 127.0.0.1)."""
    out.write_text(
        kubeconfig.read_text().replace(f"https://127.0.0.1:{target_port}", f"https://127.0.0.1:{proxy.port}")
    )
    return out
