#!/usr/bin/env python3
"""A TCP proxy that can play a database outage, for Herald's end-to-end tests.

    outage_proxy.py TARGET_HOST TARGET_PORT

Listens on a free loopback port and prints "proxy listening on PORT". SIGUSR1 starts an outage:
every proxied connection is cut and new ones are refused (the listener closes), as when the
server stops. SIGHUP stalls instead: connections are accepted and kept, but nothing is passed
on, as from a server too loaded to answer. SIGUSR2 ends either. Each is acknowledged on
standard output ("outage", "stalled", "resumed") once in effect. SIGTERM exits.
"""
import asyncio
import signal
import sys


async def main() -> None:
    # A parent may have blocked these (a test runner's threads do), and children inherit masks.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGTERM})
    target_host, target_port = sys.argv[1], int(sys.argv[2])
    writers: set[asyncio.StreamWriter] = set()
    state = {"server": None, "port": 0}
    flowing = asyncio.Event()
    flowing.set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        writers.update({client_writer, server_writer})
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        writers.discard(client_writer)
        writers.discard(server_writer)

    async def listen(port: int) -> None:
        state["server"] = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
        state["port"] = state["server"].sockets[0].getsockname()[1]

    def outage() -> None:
        if state["server"] is not None:
            state["server"].close()
            state["server"] = None
        for writer in list(writers):
            transport = writer.transport
            if transport is not None:
                transport.abort()
        writers.clear()
        print("outage", flush=True)

    def stall() -> None:
        flowing.clear()
        print("stalled", flush=True)

    async def reopen() -> None:
        await listen(state["port"])
        print("resumed", flush=True)

    def resume() -> None:
        flowing.set()
        if state["server"] is None:
            asyncio.ensure_future(reopen())
        else:
            print("resumed", flush=True)

    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    # Before the port is printed: a test signals as soon as it reads it, and a signal that
    # came before its handler (SIGHUP's default) ended the proxy without a word.
    loop.add_signal_handler(signal.SIGUSR1, outage)
    loop.add_signal_handler(signal.SIGUSR2, resume)
    loop.add_signal_handler(signal.SIGHUP, stall)
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    await listen(0)
    print(f"proxy listening on {state['port']}", flush=True)
    await stop


asyncio.run(main())
