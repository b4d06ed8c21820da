"""The notices collectors send while the command runs: a process whose trace file could not be opened or
written tells the tool so over an abstract unix datagram socket, named (without its leading NUL) in
BISECT_SMEM_TRACE_NOTIFY; each notice is appended to notices.jsonl in the trace folder (0600), where reading the
trace finds it, so such a process is never a silent "0 refusals".

A thread receives them while the command runs (a datagram socket's queue is short, and a collector sends
without waiting), and what is queued when the command ends is read before the folder is explained. Anyone on
the host can send to an abstract socket, so what is kept is bounded: datagrams of at most NOTICE_BYTES, at most
MAX_NOTICES of them, each an ``unwritable`` notice with its fields of the right types, written back as JSON the
tool made; anything else is dropped."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

FILE = "notices.jsonl"
NOTICE_BYTES = 8192
MAX_NOTICES = 4096
FIELDS = {"event": str, "pid": int, "errno": int, "path": str, "command": str}  # the contract's unwritable notice


def notice(data: bytes) -> dict[str, object] | None:
    """The notice in one datagram, with exactly the contract's fields; None for anything else."""
    if len(data) > NOTICE_BYTES:
        return None
    try:
        document = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("event") != "unwritable":
        return None
    if any(type(document.get(key)) is not kind for key, kind in FIELDS.items()):  # noqa: E721 - bool is no pid
        return None
    return {key: document[key] for key in FIELDS}


class Listener:
    """The socket, bound at once (its name goes in the command's environment), and what it has kept."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        self.name: str | None = f"bisect-smem-trace-{os.getpid()}-{secrets.token_hex(8)}"
        self.kept = 0
        self._socket: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            self._socket.bind("\0" + self.name)
        except OSError:  # no socket (a sandbox without unix sockets): the command runs, without notices
            self._socket.close()
            self._socket, self.name = None, None
        else:
            self._socket.setblocking(False)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._socket is not None:
            self._socket.close()

    @contextlib.contextmanager
    def receiving(self) -> Iterator[None]:
        """Receive in a thread while the body runs; read what is left queued when it ends."""
        if self._socket is None:
            yield
            return
        stop_read, stop_write = os.pipe2(os.O_CLOEXEC)
        thread = threading.Thread(target=self._receive, args=(stop_read,), name="trace-notices", daemon=True)
        thread.start()
        try:
            yield
        finally:
            os.write(stop_write, b"x")
            thread.join()
            os.close(stop_read)
            os.close(stop_write)
            self.drain()

    def _receive(self, stop: int) -> None:
        assert self._socket is not None  # noqa: S101 - receiving starts this thread only with a socket
        while True:
            ready = select.select([self._socket, stop], [], [])[0]
            if stop in ready:
                return
            self.drain()

    def drain(self) -> None:
        """Keep every notice queued now."""
        while self._socket is not None:
            try:
                data = self._socket.recv(NOTICE_BYTES + 1)
            except OSError:  # BlockingIOError: nothing more queued
                return
            kept = notice(data)
            if kept is not None and self.kept < MAX_NOTICES:
                self._append(kept)

    def _append(self, kept: dict[str, object]) -> None:
        line = (json.dumps(kept, ensure_ascii=True) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return  # the folder itself is gone: there is no trace to tell about
        try:
            os.write(fd, line)
            self.kept += 1
        finally:
            os.close(fd)
