// A CUTLASS 3.x/4.x Hopper GEMM (bf16, 128x256x64, cooperative, row-major C and D as fit's model has them) with
// StageCount<STAGES>: at 5 stages its SharedStorageSize (279552 B by fit) exceeds the H200's 232448 B, so initialize()'s cudaFuncSetAttribute is refused
// and initialize() returns Error Internal. Prints sizeof(SharedStorage) for bisect-smem trace to be checked against.
// Build: nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -I CUTLASS/include -I CUTLASS/tools/util/include
#include <cstdio>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/device_memory.h"
#include "cutlass/util/packed_stride.hpp"

#ifndef STAGES
#define STAGES 5
#endif

using namespace cute;
using Element = cutlass::bfloat16_t;
using Accumulator = float;
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_1, _1, _1>;
constexpr int Alignment = 8;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Accumulator, Element, cutlass::layout::RowMajor,
    Alignment, Element, cutlass::layout::RowMajor, Alignment,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, Alignment, Element,
    cutlass::layout::ColumnMajor, Alignment, Accumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCount<STAGES>, cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line out before a CUDA error can end the program
  std::printf("sizeof(SharedStorage) = %zu B (StageCount<%d>)\n", sizeof(typename GemmKernel::SharedStorage), STAGES);
  int M = 512, N = 512, K = 512;
  cutlass::DeviceAllocation<Element> A(M * K), B(K * N), C(M * N), D(M * N);
  auto sA = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, {M, K, 1});
  auto sB = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, {N, K, 1});
  auto sC = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, {M, N, 1});
  auto sD = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, {M, N, 1});
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, 1},
                                {A.get(), sA, B.get(), sB}, {{1.f, 0.f}, C.get(), sC, D.get(), sD}};
  Gemm gemm;
  cutlass::device_memory::allocation<uint8_t> workspace(Gemm::get_workspace_size(args));
  cutlass::Status status = gemm.can_implement(args);
  std::printf("can_implement: %s\n", cutlassGetStatusString(status));
  status = gemm.initialize(args, workspace.get());
  std::printf("initialize: %s\n", cutlassGetStatusString(status));
  if (status == cutlass::Status::kSuccess) {
    status = gemm.run();
    std::printf("run: %s\n", cutlassGetStatusString(status));
  }
  return status == cutlass::Status::kSuccess ? 0 : 1;
}
