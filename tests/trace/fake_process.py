"""A process that plays CUDA calls through the fake libcupti into the collector, as a traced program would:
``python fake_process.py FAKE_DIR COLLECTOR SCENARIO``, with BISECT_SMEM_TRACE_DIR set. The parameter
structs are written here from CUDA 13.0's generated_cuda_meta.h, generated_cuda_runtime_api_meta.h and cuda.h,
independently of the collector's own declarations. Scenarios: "all" (attribute sets, launches, a kernel node),
"killed" (the same, then SIGKILL), "cupti-by-path", "python" (the ctypes fallback), "r535" (the handles' names
given by the calls that make them first, for a driver without cuFuncGetName), "graphs" and "graphs-killed"
(captured, instantiated, replayed, refused and changed graphs; the second killed after the replays)."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

P, U, Int = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int


class FakeKernel(ctypes.Structure):  # fake_cuda.c's fake_kernel
    _fields_ = [("name", ctypes.c_char_p), ("static_bytes", Int), ("is_kernel", Int), ("max_dynamic_bytes", Int),
                ("max_threads", Int), ("registers", Int)]


DEFAULT_DYNAMIC_BYTES = 49152  # a kernel's MaxDynamicSharedMemorySize until it raises it: 48 KiB
MAX_THREADS, REGISTERS = 1024, 32


def fake_kernel(name: bytes, static_bytes: int = 0, is_kernel: int = 0) -> FakeKernel:
    """A kernel as the driver holds it once loaded: its dynamic limit 48 KiB less its static bytes."""
    return FakeKernel(name, static_bytes, is_kernel, DEFAULT_DYNAMIC_BYTES - static_bytes, MAX_THREADS, REGISTERS)


class Dim3(ctypes.Structure):
    _fields_ = [("x", U), ("y", U), ("z", U)]


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, a 64-byte union
    _fields_ = [("id", Int), ("pad", ctypes.c_char * 4), ("x", U), ("y", U), ("z", U), ("rest", ctypes.c_char * 52)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", U), ("gridDimY", U), ("gridDimZ", U), ("blockDimX", U), ("blockDimY", U),
                ("blockDimZ", U), ("sharedMemBytes", U), ("hStream", P), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("numAttrs", U)]


class FuncSetAttribute(ctypes.Structure):  # cuFuncSetAttribute_params
    _fields_ = [("hfunc", P), ("attrib", Int), ("value", Int)]


class KernelSetAttribute(ctypes.Structure):  # cuKernelSetAttribute_params
    _fields_ = [("attrib", Int), ("val", Int), ("kernel", P), ("dev", Int)]


class RuntimeSetAttribute(ctypes.Structure):  # cudaFuncSetAttribute_v9000_params
    _fields_ = [("func", P), ("attr", Int), ("value", Int)]


class LaunchKernel(ctypes.Structure):  # cuLaunchKernel_params
    _fields_ = [("f", P), ("gridDimX", U), ("gridDimY", U), ("gridDimZ", U), ("blockDimX", U), ("blockDimY", U),
                ("blockDimZ", U), ("sharedMemBytes", U), ("hStream", P), ("kernelParams", P), ("extra", P)]


class LaunchKernelEx(ctypes.Structure):  # cuLaunchKernelEx_params
    _fields_ = [("config", ctypes.POINTER(LaunchConfig)), ("f", P), ("kernelParams", P), ("extra", P)]


class RuntimeLaunch(ctypes.Structure):  # cudaLaunchKernel_v7000_params
    _fields_ = [("func", P), ("gridDim", Dim3), ("blockDim", Dim3), ("args", P), ("sharedMem", ctypes.c_size_t),
                ("stream", P)]


class KernelNodeParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", P), ("gridDimX", U), ("gridDimY", U), ("gridDimZ", U), ("blockDimX", U), ("blockDimY", U),
                ("blockDimZ", U), ("sharedMemBytes", U), ("kernelParams", P), ("extra", P), ("kern", P), ("ctx", P)]


class AddKernelNode(ctypes.Structure):  # cuGraphAddKernelNode_v2_params
    _fields_ = [("phGraphNode", P), ("hGraph", P), ("dependencies", P), ("numDependencies", ctypes.c_size_t),
                ("nodeParams", ctypes.POINTER(KernelNodeParams))]


class GraphNodeParams(ctypes.Structure):  # CUgraphNodeParams: type, reserved0[3], a 232-byte union, reserved2
    _fields_ = [("type", Int), ("reserved0", Int * 3), ("kernel", KernelNodeParams),
                ("rest", ctypes.c_char * (232 - ctypes.sizeof(KernelNodeParams))), ("reserved2", ctypes.c_longlong)]


class RuntimeKernelNodeParams(ctypes.Structure):  # cudaKernelNodeParams
    _fields_ = [("func", P), ("gridDim", Dim3), ("blockDim", Dim3), ("sharedMemBytes", U), ("kernelParams", P),
                ("extra", P)]


class InstantiateWithFlags(ctypes.Structure):  # cuGraphInstantiateWithFlags_params
    _fields_ = [("phGraphExec", P), ("hGraph", P), ("flags", ctypes.c_ulonglong)]


class InstantiateWithParams(ctypes.Structure):  # cuGraphInstantiateWithParams_params
    _fields_ = [("phGraphExec", P), ("hGraph", P), ("instantiateParams", P)]


class InstantiateParams(ctypes.Structure):  # CUDA_GRAPH_INSTANTIATE_PARAMS
    _fields_ = [("flags", ctypes.c_uint64), ("hUploadStream", P), ("hErrNode_out", P), ("result_out", Int)]


class BeginCapture(ctypes.Structure):  # cuStreamBeginCapture_v2_params (and cuStreamEndCapture's first field)
    _fields_ = [("hStream", P), ("mode", Int)]


class GraphLaunch(ctypes.Structure):  # cuGraphLaunch_params, cuGraphUpload_params
    _fields_ = [("hGraph", P), ("hStream", P)]


class GraphExecUpdate(ctypes.Structure):  # cuGraphExecUpdate_v2_params
    _fields_ = [("hGraphExec", P), ("hGraph", P), ("resultInfo", P)]


class GraphExecDestroy(ctypes.Structure):  # cuGraphExecDestroy_params
    _fields_ = [("hGraphExec", P)]


class ExecKernelNodeSetParams(ctypes.Structure):  # cuGraphExecKernelNodeSetParams_v2_params
    _fields_ = [("hGraphExec", P), ("hNode", P), ("nodeParams", ctypes.POINTER(KernelNodeParams))]


class KernelNodeSetParams(ctypes.Structure):  # cuGraphKernelNodeSetParams_v2_params
    _fields_ = [("hNode", P), ("nodeParams", ctypes.POINTER(KernelNodeParams))]


class RuntimeKernelNodeSetParams(ctypes.Structure):  # cudaGraphKernelNodeSetParams_v10000_params
    _fields_ = [("node", P), ("pNodeParams", ctypes.POINTER(RuntimeKernelNodeParams))]


class AddNode(ctypes.Structure):  # cuGraphAddNode_params
    _fields_ = [("phGraphNode", P), ("hGraph", P), ("dependencies", P), ("numDependencies", ctypes.c_size_t),
                ("nodeParams", ctypes.POINTER(GraphNodeParams))]


class GetByName(ctypes.Structure):  # cuModuleGetFunction_params, cuLibraryGetKernel_params
    _fields_ = [("handle", ctypes.POINTER(P)), ("owner", P), ("name", ctypes.c_char_p)]


class KernelGetFunction(ctypes.Structure):  # cuKernelGetFunction_params
    _fields_ = [("pFunc", ctypes.POINTER(P)), ("kernel", P)]


class GetFuncBySymbol(ctypes.Structure):  # cudaGetFuncBySymbol_v11000_params
    _fields_ = [("functionPtr", ctypes.POINTER(P)), ("symbolPtr", P)]


DRIVER, RUNTIME = 1, 2
# cupti_driver_cbid.h and cupti_runtime_cbid.h, CUDA 13.0
CU_FUNC_SET_ATTRIBUTE, CU_KERNEL_SET_ATTRIBUTE, CU_LAUNCH_KERNEL, CU_LAUNCH_KERNEL_EX = 481, 687, 307, 652
CU_GRAPH_ADD_KERNEL_NODE_V2, CUDA_FUNC_SET_ATTRIBUTE, CUDA_LAUNCH_KERNEL = 689, 273, 211
CU_GRAPH_INSTANTIATE_WITH_FLAGS, CU_GRAPH_INSTANTIATE_WITH_PARAMS, CU_GRAPH_UPLOAD, CU_GRAPH_LAUNCH = 643, 656, 580, 514
CU_GRAPH_LAUNCH_PTSZ = 515
CU_STREAM_BEGIN_CAPTURE_V2, CU_STREAM_END_CAPTURE = 539, 497
CU_GRAPH_EXEC_DESTROY, CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2, CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2 = 516, 692, 691
CU_GRAPH_ADD_NODE, CUDA_GRAPH_KERNEL_NODE_SET_PARAMS, CU_GRAPH_EXEC_UPDATE_V2 = 712, 288, 696
CU_MODULE_GET_FUNCTION, CU_LIBRARY_GET_KERNEL, CU_KERNEL_GET_FUNCTION, CUDA_GET_FUNC_BY_SYMBOL = 23, 681, 683, 336
NODE_KERNEL, NODE_MEMCPY, NODE_GRAPH = 0, 1, 4  # CUgraphNodeType
REPLAYS = 1000  # cuGraphLaunch of the captured graph, as a decode loop replays it

# A real kernel's name: CUTLASS 4.7.0's sm90 GEMM (bf16, 128x256x64, cooperative, StageCount<5>) built by nvcc 13.0.
CUTLASS = (Path(__file__).with_name("cutlass_kernel_name.txt")).read_bytes().strip()


class Player:
    """Plays calls as the driver makes them: the fake driver answers (its kernels keep their attributes), then
    the callbacks see its answer."""

    def __init__(self, cupti: ctypes.CDLL, driver: ctypes.CDLL) -> None:
        self.cupti, self.driver, self.correlation = cupti, driver, 100
        driver.fake_launch_result.argtypes = [P, U, U]
        driver.cuFuncSetAttribute.argtypes = [P, Int, Int]

    def call(self, domain: int, cbid: int, name: str, params: ctypes.Structure, result: int) -> None:
        self.correlation += 1
        self.cupti.fake_call(domain, cbid, name.encode(), ctypes.addressof(params), result, None, self.correlation)

    def launch(self, kernel: FakeKernel | int, threads: int, dynamic_bytes: int) -> int:
        """cuLaunchKernel of one block; ``kernel`` may be a bare handle, which the driver is not asked about."""
        handle = kernel if isinstance(kernel, int) else ctypes.addressof(kernel)
        result = 0 if isinstance(kernel, int) else self.driver.fake_launch_result(handle, threads, dynamic_bytes)
        self.call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel",
                  LaunchKernel(handle, 1, 1, 1, threads, 1, 1, dynamic_bytes, None), result)
        return result

    def set_max_dynamic_bytes(self, kernel: FakeKernel, value: int) -> int:
        result = self.driver.cuFuncSetAttribute(ctypes.addressof(kernel), 8, value)
        self.call(DRIVER, CU_FUNC_SET_ATTRIBUTE, "cuFuncSetAttribute", FuncSetAttribute(ctypes.addressof(kernel), 8,
                                                                                         value), result)
        return result


def unraised(play: Player, _: list[str]) -> None:
    """CuPy's RawKernel launched with 100000 B before its limit was raised, then after; then too many threads."""
    kernel = fake_kernel(b"_Z6rawkerPf")
    assert play.launch(kernel, 128, 100000) == 1  # refused: the limit is still 49152
    assert play.set_max_dynamic_bytes(kernel, 100000) == 0
    assert play.launch(kernel, 128, 100000) == 0
    assert play.launch(kernel, 128, 120000) == 1  # refused: over the raised limit
    assert play.launch(kernel, 2048, 0) == 1  # refused for its threads, not its shared memory


def execs(play: Player, args: list[str]) -> None:
    """Two launches, then exec of this same program (the pid stays), which launches five more."""
    kernel = fake_kernel(b"_Z6kernelPf")
    for _ in range(2):
        play.launch(kernel, 128, 1000)
    os.execv(sys.executable, [sys.executable, __file__, *args, "exec-after"])


def exec_after(play: Player, _: list[str]) -> None:
    kernel = fake_kernel(b"_Z6kernelPf")
    for _ in range(5):
        play.launch(kernel, 128, 1000)


ENDED_AFTER = 100  # launches of one configuration before the process is ended without exit handlers


def ended(how: str) -> Callable[[Player, list[str]], None]:
    def scenario(play: Player, _: list[str]) -> None:
        kernel = fake_kernel(b"_Z6kernelPf")
        for _ in range(ENDED_AFTER):
            play.launch(kernel, 128, 1000)
        if how == "exit":
            os._exit(0)
        os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGTERM)
    return scenario


def forks(play: Player, _: list[str]) -> None:
    """A launch, then a forked child that launches twice another configuration and leaves with os._exit."""
    kernel = fake_kernel(b"_Z6kernelPf")
    play.launch(kernel, 128, 1000)
    child = os.fork()
    if child == 0:
        play.launch(kernel, 64, 2000)
        play.launch(kernel, 64, 2000)
        os._exit(0)
    os.waitpid(child, 0)
    play.launch(kernel, 128, 1000)


PAST_TABLE_CONFIGS = 12000  # distinct dynamic bytes per kernel, for two kernels: past the collector's table
PAST_TABLE_PASSES = 2
PAST_TABLE_HANDLES = 3000  # kernels first seen past the table, more than its overflow table holds


def past_table(play: Player, _: list[str]) -> None:
    """Autotuning as torch.compile max-autotune does it: more configurations than the table, each launched
    PAST_TABLE_PASSES times; a refused one past the table; then many kernels seen only past the table."""
    first, second = fake_kernel(b"_Z5firstPf"), fake_kernel(b"_Z6secondPf")
    for _ in range(PAST_TABLE_PASSES):
        for dynamic_bytes in range(PAST_TABLE_CONFIGS):
            play.launch(first, 128, dynamic_bytes)
            play.launch(second, 128, dynamic_bytes)
    assert play.launch(first, 128, 300000) == 1
    for handle in range(PAST_TABLE_HANDLES):  # never asked about past the table: bare handles will do
        for _ in range(2):
            play.launch(0x100000 + 64 * handle, 128, 0)


def write_fails(play: Player, _: list[str]) -> None:
    """Writes that fail (EFBIG: a file size limit, its signal ignored), as a full disk's would, after the
    process line was written: the program runs on."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
    kernel = fake_kernel(b"_Z6kernelPf")
    for dynamic_bytes in range(10):
        play.launch(kernel, 128, dynamic_bytes)


THREADS, THREAD_LAUNCHES, THREAD_CONFIGS = 8, 400, 50


def threads(play: Player, _: list[str]) -> None:
    """THREADS threads launching at once through the same configurations (ctypes lets go of the GIL in each
    call, so the callbacks run side by side): every launch counted once, every configuration written once."""
    kernel = fake_kernel(b"_Z6kernelPf")
    start = threading.Barrier(THREADS)

    def launcher() -> None:
        start.wait()
        for i in range(THREAD_LAUNCHES):
            play.launch(kernel, 128, i % THREAD_CONFIGS)

    workers = [threading.Thread(target=launcher) for _ in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


SCENARIOS: dict[str, Callable[[Player, list[str]], None]] = {
    "threads": threads, "write-fails": write_fails,
    "unraised": unraised, "exec": execs, "exec-after": exec_after, "forks": forks, "past-table": past_table,
    "ends-by-SIGKILL": ended("kill"), "ends-by-SIGTERM": ended("term"), "ends-by-os._exit": ended("exit"),
}


Call = Callable[..., None]


def play_graphs(call: Call, driver: ctypes.CDLL, kernels: dict[str, ctypes.Structure], scenario: str) -> None:
    """A graph captured from a stream, instantiated, uploaded and replayed REPLAYS times, destroyed, its handle
    instantiated again and updated; one whose instantiation is refused; one whose replays are refused; kernel
    nodes changed and added by hand."""
    driver.fake_graph_create.restype = P
    driver.fake_graph_add.restype = P
    driver.fake_graph_add.argtypes = [P, Int, ctypes.POINTER(KernelNodeParams), P]
    attention, plain, cutlass = (ctypes.addressof(kernels[k]) for k in ("attention", "plain", "cutlass"))
    idle, capturing = Int(0), Int(1)
    stream = ctypes.addressof(idle)

    def graph(*nodes: tuple[int, KernelNodeParams | None, int | None]) -> tuple[int, list[int]]:
        made = driver.fake_graph_create()
        return made, [driver.fake_graph_add(made, kind, params and ctypes.pointer(params), child)
                      for kind, params, child in nodes]

    # Capture: the launch is seen (captured) and the driver holds it as a kernel node of the captured graph,
    # beside a memcpy node and a child graph with a CUkernel's node.
    call(DRIVER, CU_STREAM_BEGIN_CAPTURE_V2, "cuStreamBeginCapture_v2", BeginCapture(ctypes.addressof(capturing)),
         0, 29)
    call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel",
         LaunchKernel(attention, 16, 1, 1, 128, 1, 1, 100000, ctypes.addressof(capturing)), 0, 30)
    call(DRIVER, CU_STREAM_END_CAPTURE, "cuStreamEndCapture", BeginCapture(ctypes.addressof(capturing)), 0, 30)
    child, _ = graph((NODE_KERNEL, KernelNodeParams(None, 1, 1, 1, 384, 1, 1, 4096, None, None, cutlass), None))
    captured, (node, _, _) = graph((NODE_KERNEL, KernelNodeParams(attention, 16, 1, 1, 128, 1, 1, 100000), None),
                                   (NODE_MEMCPY, None, None), (NODE_GRAPH, None, child))
    exec_handle = ctypes.create_string_buffer(64)  # the driver's CUgraphExec: an address it owns
    made = P(ctypes.addressof(exec_handle))
    call(DRIVER, CU_GRAPH_INSTANTIATE_WITH_FLAGS, "cuGraphInstantiateWithFlags",
         InstantiateWithFlags(ctypes.addressof(made), captured, 0), 0, 31)
    call(DRIVER, CU_GRAPH_UPLOAD, "cuGraphUpload", GraphLaunch(made, stream), 0, 32)
    for corr in range(REPLAYS):
        call(DRIVER, CU_GRAPH_LAUNCH, "cuGraphLaunch", GraphLaunch(made, stream), 0, 1000 + corr)
    if scenario == "graphs-killed":
        os.kill(os.getpid(), 9)
    # The exec's node takes new parameters: written again with its id, for the replays after it.
    bigger = KernelNodeParams(attention, 16, 1, 1, 128, 1, 1, 120000)
    for _ in range(3):  # set again before each replay, as a loop that changes only the arguments does
        call(DRIVER, CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2, "cuGraphExecKernelNodeSetParams_v2",
             ExecKernelNodeSetParams(made, node, ctypes.pointer(bigger)), 0, 33)
    # Graphs whose instantiation the driver refuses (CUDA_ERROR_INVALID_VALUE): one kernel node asks too much.
    # cuGraphInstantiateWithParams names that node; cuGraphInstantiateWithFlags has no place to.
    refused_exec = P(None)
    for corr, kind in ((34, "with params"), (35, "with flags")):
        too_big, (_, cause) = graph((NODE_KERNEL, KernelNodeParams(plain, 1, 1, 1, 64, 1, 1, 512), None),
                                    (NODE_KERNEL, KernelNodeParams(plain, 1, 1, 1, 64, 1, 1, 300000), None))
        if kind == "with params":
            named = InstantiateParams(0, None, cause, 1)  # CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED
            call(DRIVER, CU_GRAPH_INSTANTIATE_WITH_PARAMS, "cuGraphInstantiateWithParams",
                 InstantiateWithParams(ctypes.addressof(refused_exec), too_big, ctypes.addressof(named)), 1, corr)
        else:
            call(DRIVER, CU_GRAPH_INSTANTIATE_WITH_FLAGS, "cuGraphInstantiateWithFlags",
                 InstantiateWithFlags(ctypes.addressof(refused_exec), too_big, 0), 1, corr)
    # A graph instantiated, whose upload and three launches are refused.
    refused_graph, _ = graph((NODE_KERNEL, KernelNodeParams(plain, 2, 1, 1, 64, 1, 1, 60000), None))
    second_handle = ctypes.create_string_buffer(64)
    second = P(ctypes.addressof(second_handle))
    call(DRIVER, CU_GRAPH_INSTANTIATE_WITH_FLAGS, "cuGraphInstantiateWithFlags",
         InstantiateWithFlags(ctypes.addressof(second), refused_graph, 0), 0, 36)
    call(DRIVER, CU_GRAPH_UPLOAD, "cuGraphUpload", GraphLaunch(second, stream), 1, 37)
    for corr in range(3):
        call(DRIVER, CU_GRAPH_LAUNCH, "cuGraphLaunch", GraphLaunch(second, stream), 1, 37 + corr)
    # The first exec destroyed; its handle comes back for the captured graph again, replayed three times.
    call(DRIVER, CU_GRAPH_EXEC_DESTROY, "cuGraphExecDestroy", GraphExecDestroy(made), 0, 40)
    call(DRIVER, CU_GRAPH_INSTANTIATE_WITH_FLAGS, "cuGraphInstantiateWithFlags",
         InstantiateWithFlags(ctypes.addressof(made), captured, 0), 0, 41)
    for corr in range(3):
        call(DRIVER, CU_GRAPH_LAUNCH, "cuGraphLaunch", GraphLaunch(made, stream), 0, 42 + corr)
    # Updated in place to another graph's nodes: the replays after it run those.
    # Updated in place twice to graphs of the same nodes (a graph rebuilt before each replay): one change.
    for step in range(2):
        updated, _ = graph((NODE_KERNEL, KernelNodeParams(plain, 1, 1, 1, 32, 1, 1, 1024), None))
        call(DRIVER, CU_GRAPH_EXEC_UPDATE_V2, "cuGraphExecUpdate_v2", GraphExecUpdate(made, updated, None), 0, 45)
        for corr, (cbid, name) in enumerate(((CU_GRAPH_LAUNCH, "cuGraphLaunch"),
                                             (CU_GRAPH_LAUNCH_PTSZ, "cuGraphLaunch_ptsz"))):
            call(DRIVER, cbid, name, GraphLaunch(made, stream), 0, 46 + 2 * step + corr)
    # Kernel nodes changed and added by hand: count 1 each, no exec.
    changed = KernelNodeParams(plain, 8, 1, 1, 32, 1, 1, 2048)
    call(RUNTIME, CUDA_GRAPH_KERNEL_NODE_SET_PARAMS, "cudaGraphKernelNodeSetParams",
         RuntimeKernelNodeSetParams(node, ctypes.pointer(RuntimeKernelNodeParams(
             P(0x1234), Dim3(8, 1, 1), Dim3(32, 1, 1), 2048))), 0, 50)
    call(DRIVER, CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2, "cuGraphKernelNodeSetParams_v2",
         KernelNodeSetParams(node, ctypes.pointer(changed)), 0, 50)
    added = GraphNodeParams(NODE_KERNEL, (Int * 3)(), KernelNodeParams(None, 4, 1, 1, 96, 1, 1, 8192, None, None,
                                                                      cutlass))
    call(DRIVER, CU_GRAPH_ADD_NODE, "cuGraphAddNode", AddNode(None, captured, None, 0, ctypes.pointer(added)), 0, 51)
    memcpy = GraphNodeParams(NODE_MEMCPY)
    call(DRIVER, CU_GRAPH_ADD_NODE, "cuGraphAddNode", AddNode(None, captured, None, 0, ctypes.pointer(memcpy)), 0, 52)


def play_names(call: Call, driver: ctypes.CDLL, kernels: dict[str, ctypes.Structure]) -> None:
    """Where handles get their names on a driver without cuFuncGetName/cuKernelGetName: CUTLASS's kernel from
    its library (lazy loading), CuPy's function from its module, a CUfunction of that CUkernel, and a host stub
    looked up by symbol."""
    plain, cutlass = P(ctypes.addressof(kernels["plain"])), P(ctypes.addressof(kernels["cutlass"]))
    call(DRIVER, CU_LIBRARY_GET_KERNEL, "cuLibraryGetKernel", GetByName(ctypes.pointer(cutlass), None, CUTLASS), 0, 2)
    call(DRIVER, CU_MODULE_GET_FUNCTION, "cuModuleGetFunction", GetByName(ctypes.pointer(plain), None, b"_Z6kernelPf"),
         0, 3)
    function = P(ctypes.addressof(kernels["cutlass function"]))
    call(DRIVER, CU_KERNEL_GET_FUNCTION, "cuKernelGetFunction", KernelGetFunction(ctypes.pointer(function), cutlass),
         0, 4)
    stub, by_symbol = ctypes.cast(driver["_Z11stub_kernelPf"], P), P(ctypes.addressof(kernels["stub"]))
    call(RUNTIME, CUDA_GET_FUNC_BY_SYMBOL, "cudaGetFuncBySymbol", GetFuncBySymbol(ctypes.pointer(by_symbol), stub),
         0, 5)
    call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel", LaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, None), 0, 6)


def main() -> int:
    fake_dir, collector, scenario = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = os.RTLD_GLOBAL | os.RTLD_NOW
    driver = ctypes.CDLL(os.path.join(fake_dir, "libfakecuda.so"), mode=mode)
    if scenario != "cupti-by-path":  # else the collector loads it from BISECT_SMEM_CUPTI_LIBRARY
        ctypes.CDLL(os.path.join(fake_dir, "libcupti.so.13"), mode=mode)
    if collector.endswith(".py"):  # the ctypes fallback, as its sitecustomize starts in a traced Python
        spec = importlib.util.spec_from_file_location("fallback", collector)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        started = 1
    else:
        started = ctypes.CDLL(collector).InitializeInjection()
    cupti = ctypes.CDLL(os.path.join(fake_dir, "libcupti.so.13"), mode=mode)
    cupti.fake_call.argtypes = [Int, U, ctypes.c_char_p, P, Int, ctypes.c_char_p, U]
    if scenario in SCENARIOS:
        driver = ctypes.CDLL(os.path.join(fake_dir, "libfakecuda.so"), mode=mode)
        SCENARIOS[scenario](Player(cupti, driver), sys.argv[1:3])
        return 0 if started == 1 else 3
    kernels = {"plain": fake_kernel(b"_Z6kernelPf"), "cutlass": fake_kernel(CUTLASS, 0, 1),
               "clustered": fake_kernel(b"_Z9clusteredv", 1000), "attention": fake_kernel(b"_Z9attentionPf"),
               # the CUfunction of CUTLASS's CUkernel in this context; a kernel found through its host stub
               "cutlass function": fake_kernel(CUTLASS), "stub": fake_kernel(b"_Z11stub_kernelPf")}
    idle, capturing = Int(0), Int(1)

    def call(domain: int, cbid: int, name: str, params: ctypes.Structure, result: int, corr: int,
             symbol: bytes | None = None) -> None:
        cupti.fake_call(domain, cbid, name.encode(), ctypes.addressof(params), result, symbol, corr)

    if scenario.startswith("graphs"):
        play_graphs(call, driver, kernels, scenario)
        return 0 if started == 1 else 3
    if scenario == "r535":
        play_names(call, driver, kernels)
    plain, cutlass, clustered = (ctypes.addressof(kernels[k]) for k in ("plain", "cutlass", "clustered"))
    host_stub = P(0x1234)
    # CUTLASS's initialize(): the runtime call and the driver call it makes, one correlation id, refused.
    call(RUNTIME, CUDA_FUNC_SET_ATTRIBUTE, "cudaFuncSetAttribute", RuntimeSetAttribute(host_stub, 8, 279552), 1, 7)
    call(DRIVER, CU_KERNEL_SET_ATTRIBUTE, "cuKernelSetAttribute", KernelSetAttribute(8, 279552, cutlass, 0), 1, 7)
    # CuPy: the driver call alone, one byte over; a carveout; an attribute that is no shared memory's.
    call(DRIVER, CU_FUNC_SET_ATTRIBUTE, "cuFuncSetAttribute", FuncSetAttribute(plain, 8, 232449), 1, 8)
    call(DRIVER, CU_FUNC_SET_ATTRIBUTE, "cuFuncSetAttribute", FuncSetAttribute(plain, 9, 100), 0, 9)
    call(DRIVER, CU_FUNC_SET_ATTRIBUTE, "cuFuncSetAttribute", FuncSetAttribute(plain, 3, 1), 0, 10)
    for corr in range(11, 16):  # five launches of one configuration: one line, counted
        call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel", LaunchKernel(plain, 4, 1, 1, 128, 1, 1, 1000, None), 0, corr)
    call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel", LaunchKernel(plain, 4, 1, 1, 128, 1, 1, 300000, None), 1, 16)
    attrs = (LaunchAttribute * 2)(LaunchAttribute(1), LaunchAttribute(4, b"", 2, 1, 1))
    config = LaunchConfig(8, 1, 1, 256, 1, 1, 200000, ctypes.addressof(capturing), attrs, 2)
    # Into a stream under capture: the collector asks the driver only while a capture is open.
    call(DRIVER, CU_STREAM_BEGIN_CAPTURE_V2, "cuStreamBeginCapture_v2", BeginCapture(ctypes.addressof(capturing)),
         0, 17)
    call(DRIVER, CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", LaunchKernelEx(ctypes.pointer(config), clustered), 0, 17)
    call(DRIVER, CU_STREAM_END_CAPTURE, "cuStreamEndCapture", BeginCapture(ctypes.addressof(capturing)), 0, 17)
    if scenario == "capture-closed":  # the same launch once its capture ended: the stream says it still captures,
        # but with no capture open the collector does not ask (a driver call per launch saved), so not captured
        call(DRIVER, CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", LaunchKernelEx(ctypes.pointer(config), clustered), 0,
             90)
    # cudaLaunchKernel and the cuLaunchKernel it makes: one record, named after the runtime call.
    call(RUNTIME, CUDA_LAUNCH_KERNEL, "cudaLaunchKernel",
         RuntimeLaunch(host_stub, Dim3(2, 1, 1), Dim3(64, 1, 1), None, 2048, None), 0, 18, b"kernel(float*)")
    call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel", LaunchKernel(plain, 2, 1, 1, 64, 1, 1, 2048, ctypes.addressof(idle)),
         0, 18)
    node = KernelNodeParams(None, 1, 1, 1, 384, 1, 1, 4096, None, None, cutlass, None)
    call(DRIVER, CU_GRAPH_ADD_KERNEL_NODE_V2, "cuGraphAddKernelNode_v2",
         AddKernelNode(None, None, None, 0, ctypes.pointer(node)), 0, 19)
    if scenario == "killed":
        os.kill(os.getpid(), 9)
    return 0 if started == 1 else 3


if __name__ == "__main__":
    sys.exit(main())
