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
import sys
from collections.abc import Callable
from pathlib import Path

P, U, Int = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int


class FakeKernel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("static_bytes", Int), ("is_kernel", Int)]


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
CU_GRAPH_EXEC_DESTROY, CU_GRAPH_EXEC_KERNEL_NODE_SET_PARAMS_V2, CU_GRAPH_KERNEL_NODE_SET_PARAMS_V2 = 516, 692, 691
CU_GRAPH_ADD_NODE, CUDA_GRAPH_KERNEL_NODE_SET_PARAMS, CU_GRAPH_EXEC_UPDATE_V2 = 712, 288, 696
CU_MODULE_GET_FUNCTION, CU_LIBRARY_GET_KERNEL, CU_KERNEL_GET_FUNCTION, CUDA_GET_FUNC_BY_SYMBOL = 23, 681, 683, 336
NODE_KERNEL, NODE_MEMCPY, NODE_GRAPH = 0, 1, 4  # CUgraphNodeType
REPLAYS = 1000  # cuGraphLaunch of the captured graph, as a decode loop replays it

# A real kernel's name: CUTLASS 4.7.0's sm90 GEMM (bf16, 128x256x64, cooperative, StageCount<5>) built by nvcc 13.0.
CUTLASS = (Path(__file__).with_name("cutlass_kernel_name.txt")).read_bytes().strip()


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
    call(DRIVER, CU_LAUNCH_KERNEL, "cuLaunchKernel",
         LaunchKernel(attention, 16, 1, 1, 128, 1, 1, 100000, ctypes.addressof(capturing)), 0, 30)
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
    if scenario == "python":  # the ctypes fallback, as its sitecustomize starts in a traced Python
        spec = importlib.util.spec_from_file_location("fallback", collector)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        started = 1
    else:
        started = ctypes.CDLL(collector).InitializeInjection()
    cupti = ctypes.CDLL(os.path.join(fake_dir, "libcupti.so.13"), mode=mode)
    cupti.fake_call.argtypes = [Int, U, ctypes.c_char_p, P, Int, ctypes.c_char_p, U]
    kernels = {"plain": FakeKernel(b"_Z6kernelPf", 0, 0), "cutlass": FakeKernel(CUTLASS, 0, 1),
               "clustered": FakeKernel(b"_Z9clusteredv", 1000, 0), "attention": FakeKernel(b"_Z9attentionPf", 0, 0),
               # the CUfunction of CUTLASS's CUkernel in this context; a kernel found through its host stub
               "cutlass function": FakeKernel(CUTLASS, 0, 0), "stub": FakeKernel(b"_Z11stub_kernelPf", 0, 0)}
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
    call(DRIVER, CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", LaunchKernelEx(ctypes.pointer(config), clustered), 0, 17)
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
