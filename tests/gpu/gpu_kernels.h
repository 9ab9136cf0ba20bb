// Kernels of the gpu tier and GPU benchmarks, compiled by nvcc in an object library of their
// own (gpu_kernels.cu) so that the tests and benchmarks are plain C++ built with the
// project's warning and sanitizer flags, which nvcc does not accept. Ran on an H200 on
// 2026-12-04.
#ifndef GRAPHCHECK_TESTS_GPU_GPU_KERNELS_H_
#define GRAPHCHECK_TESTS_GPU_GPU_KERNELS_H_

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime_api.h>

namespace graphcheck::gpu_testing {

/// Pointers passed by value inside a struct: graphcheck must find them by scanning the
/// argument's 8-byte words.
struct Pointers {
  const float* weight;
  const float* scratch;
  float* out;
  int n;
};

/// out[i] = weight[i] * scratch[i] for i < n, as one kernel node "struct_kernel(Pointers)".
cudaError_t launch_struct_kernel(const Pointers& pointers, cudaStream_t stream);

/// Captures one struct_kernel launch on `stream` into `*graph`, which the caller destroys. The
/// first failing CUDA call's error, or cudaSuccess. `mode`: global by default; threads that
/// capture while others instantiate use thread-local (a global capture is invalidated by
/// another thread's unsafe call).
cudaError_t capture_struct_kernel(const Pointers& pointers, cudaStream_t stream, cudaGraph_t* graph,
                                  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal);

/// A one-block kernel "axpy_kernel(float, const float*, float*, int)": the unit of the
/// 1,000-node benchmark graph.
cudaError_t launch_axpy_kernel(float a, const float* x, float* y, int n, cudaStream_t stream);

/// The host stub of struct_kernel(Pointers), for the launch styles that name a kernel by its
/// entry (cudaLaunchKernelExC, cudaGetKernel, cudaGetFuncBySymbol, cudaGraphAddKernelNode).
const void* struct_kernel_entry();

/// A kernel taking a TMA descriptor as a `__grid_constant__` argument and `out` after it
/// ("tma_kernel(CUtensorMap, float*)"): it writes out[0] = 1 and never dereferences the
/// descriptor, so it runs on any GPU; what graphcheck must see is the descriptor's global
/// address among the node's operands.
cudaError_t launch_tma_kernel(const CUtensorMap& map, float* out, cudaStream_t stream);

}  // namespace graphcheck::gpu_testing

#endif  // GRAPHCHECK_TESTS_GPU_GPU_KERNELS_H_
