// Kernels of the gpu tier (see gpu_kernels.h). UNVERIFIED on a GPU.
#include "gpu_kernels.h"

namespace graphcheck::gpu_testing {
namespace {

__global__ void struct_kernel(Pointers p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < p.n) {
    p.out[i] = p.weight[i] * p.scratch[i];
  }
}

__global__ void axpy_kernel(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

// __grid_constant__: the descriptor stays in the kernel's parameter space (as TMA needs),
// which is the form a TMA kernel passes it in.
__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, float* out) {
  (void)map;
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    out[0] = 1.0F;
  }
}

}  // namespace

const void* struct_kernel_entry() { return reinterpret_cast<const void*>(&struct_kernel); }

cudaError_t launch_tma_kernel(const CUtensorMap& map, float* out, cudaStream_t stream) {
  // clang-format off
  tma_kernel<<<1, 32, 0, stream>>>(map, out);
  // clang-format on
  return cudaGetLastError();
}

cudaError_t launch_struct_kernel(const Pointers& pointers, cudaStream_t stream) {
  const int blocks = (pointers.n + 255) / 256;
  // clang-format off
  struct_kernel<<<blocks, 256, 0, stream>>>(pointers);
  // clang-format on
  return cudaGetLastError();
}

cudaError_t capture_struct_kernel(const Pointers& pointers, cudaStream_t stream, cudaGraph_t* graph,
                                  cudaStreamCaptureMode mode) {
  cudaError_t status = cudaStreamBeginCapture(stream, mode);
  if (status != cudaSuccess) {
    return status;
  }
  const cudaError_t launched = launch_struct_kernel(pointers, stream);
  status = cudaStreamEndCapture(stream, graph);  // ends the capture even after a failed launch
  return launched != cudaSuccess ? launched : status;
}

cudaError_t launch_axpy_kernel(float a, const float* x, float* y, int n, cudaStream_t stream) {
  const int threads = n < 1024 ? n : 1024;
  // clang-format off
  axpy_kernel<<<1, threads, 0, stream>>>(a, x, y, n);
  // clang-format on
  return cudaGetLastError();
}

}  // namespace graphcheck::gpu_testing
