"""bisect-smem trace's in-process collector for Python commands, where no C compiler builds the C one: trace
puts this folder first on PYTHONPATH, so every Python process the command starts subscribes to CUPTI's
callback API through ctypes at start and writes the same JSON lines as collector.c (``"collector": "python"``).

It stands alone (the traced Python may not have bisect_smem installed) and records the driver's attribute
sets and launches, and the runtime's cudaFuncSetAttribute. It does not follow CUDA graphs (kernel nodes
and replays of executable graphs) nor name handles on a driver without cuFuncGetName: those are the C
collector's. A Python callback costs several µs per launch where the C collector costs well under one. A sitecustomize of the command's own is shadowed while traced.
The layouts are CUDA 13.0's, as in cupti_abi.h.
"""

import atexit
import ctypes
import json
import os
import threading

P, U, Int = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
DRIVER, RUNTIME, EXIT = 1, 2, 1
SET_FUNC, SET_KERNEL, SET_RUNTIME = 481, 687, 273
LAUNCHES = {307: "plain", 442: "plain", 477: "plain", 478: "plain", 652: "ex", 653: "ex"}


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
        self.out, self.lock, self.counts, self.ids = out, threading.Lock(), {}, {}
        self.fd, self.pid = -1, 0
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
        self.emit({"event": "process", "format": 1, "pid": os.getpid(), "ppid": os.getppid(), "collector": "python",
                   "cupti_library": cupti._name or "", "cupti_found": how, "untraced": untraced,
                   "command": " ".join(__import__("sys").argv)[:511]})

    def emit(self, record: dict) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if self.pid != os.getpid():
                self.fd = os.open(os.path.join(self.out, f"{os.getpid()}.jsonl"),
                                  os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
                self.pid = os.getpid()
            os.write(self.fd, line)

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
        key = (f, tuple(block), smem, tuple(cluster), common["result"])
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            if self.counts[key] > 1:
                return
            self.ids[key] = len(self.ids) + 1
        name, static = self.kernel(f, False)
        self.emit({"event": "launch", "id": self.ids[key], **common, "grid": grid, "block": block, "cluster": cluster,
                   "dynamic_bytes": smem, "static_bytes": static, "captured": False, "name": name})

    def write_counts(self) -> None:
        for key, count in list(self.counts.items()):
            if count > 1:
                self.emit({"event": "count", "id": self.ids[key], "count": count})


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
        line = {"event": "process", "format": 1, "pid": os.getpid(), "ppid": os.getppid(), "collector": "python",
                "cupti_library": "", "cupti_found": "none", "untraced": "no libcupti could be loaded", "command": ""}
        with open(os.path.join(out, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        return
    globals()["_collector"] = _Collector(out, cupti, how)


try:
    _start()
except Exception:  # noqa: BLE001 - a collector never breaks the command it traces
    pass
