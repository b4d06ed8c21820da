"""PyTorch's SDPA flash kernel (bf16, head dim 128), SDPA (cuDNN's where PyTorch has it, else flash) captured in
a CUDA graph and replayed 1000 times (as a decode loop replays its graph), and a Triton matmul (the tutorial's
kernel, one config)."""

import sys

import torch
import triton
import triton.language as tl


def sdpa() -> None:
    q, k, v = (torch.randn(4, 16, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.synchronize()
    print("sdpa flash:", tuple(out.shape))


def graph_replay() -> None:
    q, k, v = (torch.randn(4, 16, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    backends = [torch.nn.attention.SDPBackend.CUDNN_ATTENTION, torch.nn.attention.SDPBackend.FLASH_ATTENTION]
    with torch.nn.attention.sdpa_kernel(backends):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # warm-up, outside the graph
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    for _ in range(1000):
        graph.replay()
    torch.cuda.synchronize()
    print("sdpa in a CUDA graph, replayed 1000 times:", tuple(out.shape))


@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm, rn, rk = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))


def matmul() -> None:
    m = n = k = 1024
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    grid = (m // 128, n // 256)
    compiled = matmul_kernel[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), BM=128, BN=256, BK=64,
                                   num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    print("triton matmul: metadata.shared =", compiled.metadata.shared)


if __name__ == "__main__":
    {"sdpa": sdpa, "graph_replay": graph_replay, "matmul": matmul}[sys.argv[1]]()
