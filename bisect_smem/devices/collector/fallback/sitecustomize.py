"""bisect-smem trace's in-process collector for Python commands, where no C compiler builds the C one: trace
puts this folder first on PYTHONPATH, so every Python process the command starts subscribes to CUPTI's
callback API through ctypes at start and writes the same JSON lines as collector.c (``"collector": "python"``).

It stands alone (the traced Python may not have bisect_smem installed) and records the driver's attribute
sets and launches, and the runtime's cudaFuncSetAttribute. It does not follow CUDA graphs (kernel nodes
and replays of executable graphs) nor name handles on a driver without cuFuncGetName: those are the C
collector's. A Python callback costs several µs per launch where the C collector costs well under one. A
sitecustomize of the command's own is shadowed while traced. The layouts are CUDA 13.0's, as in cupti_abi.h;
the files, counts and limits are collector.c's (format 2).
"""

import atexit
import ctypes
import errno
import json
import os
import socket
import sys
import threading

P, U, Int = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
DRIVER, RUNTIME, EXIT = 1, 2, 1
SET_FUNC, SET_KERNEL, SET_RUNTIME = 481, 687, 273
LAUNCHES = {307: "plain", 442: "plain", 477: "plain", 478: "plain", 652: "ex", 653: "ex"}
FORMAT, IMAGES_MAX, COMMAND_MAX = 2, 1000, 511
TABLE_CONFIGS, REFUSED_EXTRA, OVERFLOW_HANDLES = 8192, 1024, 1024  # collector.c's table and overflow table
LIMITS = (("max_dynamic_bytes", 8), ("max_threads", 0), ("registers", 4))  # CU_FUNC_ATTRIBUTE_* at a refusal


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class _Output:
    """One file per program image (PID.jsonl, then PID.2.jsonl, ... when an exec kept the pid), private, opened
    at the first line of each process, with its process line first; one notice when it cannot be written."""

    def __init__(self, out: str, process: dict) -> None:
        self.out, self.process, self.lock, self.fd, self.pid, self.path = out, process, threading.Lock(), -1, 0, out

    def _open(self) -> None:
        self.pid, self.fd = os.getpid(), -1
        for image in range(1, IMAGES_MAX + 1):
            name = f"{self.pid}.jsonl" if image == 1 else f"{self.pid}.{image}.jsonl"
            self.path = os.path.join(self.out, name)
            try:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            except OSError as exc:
                return _notify(exc.errno or 0, self.path)
            line = {"event": "process", "format": FORMAT, "image": image, "pid": self.pid, "ppid": os.getppid(),
                    "collector": "python", **self.process, "command": " ".join(sys.argv)[:COMMAND_MAX]}
            return self._write(line)
        return _notify(errno.EEXIST, self.path)

    def _write(self, record: dict) -> None:
        try:
            os.write(self.fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        except OSError as exc:
            _notify(exc.errno or 0, self.path)

    def start(self) -> None:
        """The file now, with its process line: an untraced process says why at once."""
        with self.lock:
            if self.pid != os.getpid():
                self._open()

    def emit(self, record: dict) -> None:
        with self.lock:
            if self.pid != os.getpid():
                if self.fd >= 0:
                    os.close(self.fd)  # a forked child writes its own file
                self._open()
            if self.fd >= 0:
                self._write(record)


_notified = [0]


def _notify(error: int, path: str) -> None:
    """The one notice a process sends when its trace cannot be written; without waiting, lost if unheard."""
    name = os.environ.get("BISECT_SMEM_TRACE_NOTIFY")
    if not name or _notified[0] == os.getpid():
        return
    _notified[0] = os.getpid()
    line = {"event": "unwritable", "pid": os.getpid(), "errno": error, "path": path,
            "command": " ".join(sys.argv)[:COMMAND_MAX]}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            s.sendto((json.dumps(line) + "\n").encode(), "\0" + name)
    except OSError:
        pass


class _Callback(ctypes.Structure):
    _fields_ = [("site", Int), ("function", ctypes.c_char_p), ("params", P), ("result", ctypes.POINTER(Int)),
                ("symbol", ctypes.c_char_p), ("context", P), ("context_uid", ctypes.c_uint32),
                ("correlation_data", P), ("correlation", ctypes.c_uint32)]


class _Attribute(ctypes.Structure):
    _fields_ = [("id", Int), ("pad", ctypes.c_char * 4), ("x", U), ("y", U), ("z", U), ("rest", ctypes.c_char * 52)]


class _Config(ctypes.Structure):
    _fields_ = [("grid", U * 3), ("block", U * 3), ("smem", U), ("stream", P), ("attrs", ctypes.POINTER(_Attribute)),
                ("count", U)]


class _Launch(ctypes.Structure):
    _fields_ = [("f", P), ("grid", U * 3), ("block", U * 3), ("smem", U), ("stream", P)]


class _LaunchEx(ctypes.Structure):
    _fields_ = [("config", ctypes.POINTER(_Config)), ("f", P)]


class _SetFunc(ctypes.Structure):
    _fields_ = [("handle", P), ("attribute", Int), ("value", Int)]


class _SetKernel(ctypes.Structure):
    _fields_ = [("attribute", Int), ("value", Int), ("handle", P), ("device", Int)]


class _Collector:
    def __init__(self, out: str, cupti: ctypes.CDLL, how: str) -> None:
        self.lock, self.counts, self.ids, self.overflow, self.unplaced = threading.Lock(), {}, {}, {}, 0
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError:
            self.cuda = None
        self.callback = ctypes.CFUNCTYPE(None, P, Int, ctypes.c_uint32, P)(self.on_call)
        subscriber = P()
        status = cupti.cuptiSubscribe(ctypes.byref(subscriber), self.callback, None)
        untraced = None
        if status == 39:
            untraced = "another CUPTI subscriber is active (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"
        elif status != 0:
            untraced = "cuptiSubscribe failed"
        else:
            for cbid in (SET_FUNC, SET_KERNEL, *LAUNCHES):
                cupti.cuptiEnableCallback(1, subscriber, DRIVER, cbid)
            cupti.cuptiEnableCallback(1, subscriber, RUNTIME, SET_RUNTIME)
            atexit.register(self.write_counts)
            os.register_at_fork(after_in_child=self.forget)
        self.output = _Output(out, {"cupti_library": cupti._name or "", "cupti_found": how, "untraced": untraced})
        self.emit = self.output.emit
        self.output.start()

    def forget(self) -> None:
        """A forked child starts with no launches of its own: its counts go to its own file."""
        self.lock, self.counts, self.ids, self.overflow, self.unplaced = threading.Lock(), {}, {}, {}, 0
        self.output.lock = threading.Lock()

    def kernel(self, handle: int | None, is_kernel: bool) -> tuple[str | None, int]:
        name, value = ctypes.c_char_p(), Int(-1)
        if self.cuda is None or not handle:
            return None, -1
        getter = self.cuda.cuKernelGetName if is_kernel else self.cuda.cuFuncGetName
        if getter(ctypes.byref(name), P(handle)) != 0:
            name = ctypes.c_char_p()
        if is_kernel:
            device = Int(0)
            self.cuda.cuCtxGetDevice(ctypes.byref(device))
            status = self.cuda.cuKernelGetAttribute(ctypes.byref(value), 1, P(handle), device)
        else:
            status = self.cuda.cuFuncGetAttribute(ctypes.byref(value), 1, P(handle))
        return (name.value.decode(errors="replace") if name.value else None), (value.value if status == 0 else -1)

    def on_call(self, _userdata: int, domain: int, cbid: int, data: int) -> None:
        try:
            cb = _Callback.from_address(data)
            if cb.site != EXIT or not cb.params:
                return
            result = cb.result.contents.value if cb.result else -1
            common = {"api": (cb.function or b"?").decode(), "domain": "driver" if domain == DRIVER else "runtime",
                      "correlation": cb.correlation, "result": result}
            if domain == DRIVER and cbid in LAUNCHES:
                self.launch(cbid, cb, common)
            else:
                self.attribute(domain, cbid, cb, common)
        except Exception:  # noqa: BLE001 - a collector never breaks the command it traces
            pass

    def attribute(self, domain: int, cbid: int, cb: _Callback, common: dict) -> None:
        kind = _SetKernel if cbid == SET_KERNEL else _SetFunc
        p = kind.from_address(cb.params)
        if not 8 <= p.attribute <= 15:
            return
        name, static = self.kernel(p.handle, cbid == SET_KERNEL) if domain == DRIVER else (None, -1)
        self.emit({"event": "attribute", **common, "attribute": p.attribute, "value": p.value,
                   "static_bytes": static, "name": name})

    def launch(self, cbid: int, cb: _Callback, common: dict) -> None:
        cluster = [0, 0, 0]
        if LAUNCHES[cbid] == "ex":
            p = _LaunchEx.from_address(cb.params)
            c = p.config.contents
            f, grid, block, smem = p.f, list(c.grid), list(c.block), c.smem
            for i in range(c.count):
                if c.attrs[i].id == 4:  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                    cluster = [c.attrs[i].x, c.attrs[i].y, c.attrs[i].z]
        else:
            p = _Launch.from_address(cb.params)
            f, grid, block, smem = p.f, list(p.grid), list(p.block), p.smem
        result = common["result"]
        key = (f, tuple(block), smem, tuple(cluster), result)
        with self.lock:
            count = self.counts.get(key, 0) + 1
            past_table = count == 1 and len(self.counts) >= TABLE_CONFIGS + (REFUSED_EXTRA if result else 0)
            if not past_table:
                self.counts[key] = count
                self.ids.setdefault(key, len(self.ids) + 1)
        if past_table:
            return self.count_past_table(f)
        if count > 1:
            if _power_of_two(count):
                self.emit({"event": "count", "id": self.ids[key], "count": count})
            return None
        name, static = self.kernel(f, False)
        limits = {field: self.limit(f, attribute) for field, attribute in LIMITS} if result else {}
        # In collector.c's order of fields, which trace --from reads without a JSON parser (core/trace_layout.py).
        self.emit({"event": "launch", "id": self.ids[key], "api": common["api"], "domain": common["domain"],
                   "correlation": common["correlation"], "grid": grid, "block": block, "cluster": cluster,
                   "dynamic_bytes": smem, "static_bytes": static, "result": result, **limits, "captured": False,
                   "handle": hex(f or 0), "name": name})
        return None

    def limit(self, handle: int | None, attribute: int) -> int:
        value = Int(-1)
        if self.cuda is None or not handle or self.cuda.cuFuncGetAttribute(ctypes.byref(value), attribute, P(handle)):
            return -1
        return value.value

    def count_past_table(self, handle: int | None) -> None:
        """Past the table: no name, no launch line; counted per kernel while the overflow table has room."""
        with self.lock:
            if handle and (handle in self.overflow or len(self.overflow) < OVERFLOW_HANDLES):
                count = self.overflow[handle] = self.overflow.get(handle, 0) + 1
            else:
                handle, count = None, self.unplaced + 1
                self.unplaced = count
        if _power_of_two(count):
            self.emit({"event": "overflow", "handle": hex(handle) if handle else None, "count": count})

    def write_counts(self) -> None:
        for key, count in list(self.counts.items()):
            if count > 1 and not _power_of_two(count):
                self.emit({"event": "count", "id": self.ids[key], "count": count})
        for handle, count in [*self.overflow.items(), (None, self.unplaced)]:
            if count and not _power_of_two(count):
                self.emit({"event": "overflow", "handle": hex(handle) if handle else None, "count": count})


def _cupti() -> tuple[ctypes.CDLL | None, str]:
    for soname in ("libcupti.so.13", "libcupti.so.12"):
        try:
            return ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL), "already loaded"
        except OSError:
            pass
    path = os.environ.get("BISECT_SMEM_CUPTI_LIBRARY")
    try:
        return (ctypes.CDLL(path, mode=os.RTLD_GLOBAL), "BISECT_SMEM_CUPTI_LIBRARY") if path else (None, "none")
    except OSError:
        return None, "none"


def _start() -> None:
    out = os.environ.get("BISECT_SMEM_TRACE_DIR")
    if not out or globals().get("_collector"):
        return
    cupti, how = _cupti()
    if cupti is None:
        _Output(out, {"cupti_library": "", "cupti_found": "none", "untraced": "no libcupti could be loaded"}).start()
        return
    globals()["_collector"] = _Collector(out, cupti, how)


try:
    _start()
except Exception:  # noqa: BLE001 - a collector never breaks the command it traces
    pass
