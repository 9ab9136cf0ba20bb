// Kernel nodes: argument layout (cuFuncGetParamInfo / cuKernelGetParamInfo), names, the
// argument bytes in both the kernelParams and the packed `extra` form, and TMA descriptors.
#include <cxxabi.h>
#include <graphcheck/error.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cupti/graph_reader.h"

namespace graphcheck::cupti {
namespace {

// No real kernel has this many arguments (the CUDA limit is 32 KiB of them); a fake or a
// driver bug that never returns CUDA_ERROR_INVALID_VALUE must not loop forever.
constexpr std::size_t kMaxParams = 32768;
// `extra` is a short option list; this many entries means it was not terminated.
constexpr std::size_t kMaxExtraEntries = 64;

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(name);
}

std::uintptr_t option(void* entry) { return reinterpret_cast<std::uintptr_t>(entry); }

}  // namespace

CUresult GraphReader::param_info(const KernelHandle& kernel, std::size_t index, std::size_t* offset,
                                 std::size_t* size) {
  return kernel.func != nullptr ? api_.cu_func_get_param_info(kernel.func, index, offset, size)
                                : api_.cu_kernel_get_param_info(kernel.kern, index, offset, size);
}

std::string GraphReader::kernel_name(const KernelHandle& kernel) {
  const char* name = nullptr;
  CUresult named = kernel.func != nullptr ? api_.cu_func_get_name(&name, kernel.func)
                                          : api_.cu_kernel_get_name(&name, kernel.kern);
  if (named != CUDA_SUCCESS && kernel.func != nullptr) {
    // A CUkernel in `func` (see layout()) may be named only by cuKernelGetName.
    named = api_.cu_kernel_get_name(&name, reinterpret_cast<CUkernel>(kernel.func));
  }
  // A missing name does not stop the check: the finding still names node and argument.
  return named == CUDA_SUCCESS && name != nullptr ? demangle(name) : "unnamed_kernel";
}

const KernelLayout& GraphReader::layout(const KernelHandle& kernel) {
  const void* key = kernel.func != nullptr ? static_cast<const void*>(kernel.func)
                                           : static_cast<const void*>(kernel.kern);
  if (key == nullptr) {
    throw Error(
        "graphcheck: a kernel node has neither func nor kern set; cannot read its arguments");
  }
  if (unloads_ != nullptr) {
    // A module or library was unloaded since these were cached: its handles may now name
    // another module's kernels.
    const std::uint64_t unloads = unloads_->load(std::memory_order_acquire);
    if (unloads != unloads_seen_) {
      layouts_.clear();
      unloads_seen_ = unloads;
    }
  }
  if (const auto found = layouts_.find(key); found != layouts_.end()) {
    return found->second;
  }
  KernelLayout layout;
  KernelHandle query = kernel;
  for (std::size_t index = 0;; ++index) {
    std::size_t offset = 0;
    std::size_t size = 0;
    CUresult result = param_info(query, index, &offset, &size);
    if (index == 0 && query.func != nullptr && result != CUDA_SUCCESS &&
        result != CUDA_ERROR_INVALID_VALUE) {
      // Library-managed kernels (cudaGetKernel, cuBLAS) put a CUkernel cast to CUfunction in
      // the node, which cuFuncGetParamInfo may refuse: ask cuKernelGetParamInfo [verify].
      // Its INVALID_VALUE means "no arguments" only for a handle cuKernelGetName accepts;
      // for another it likely means "not a CUkernel", and the first error stands: the node
      // is then not checked, never read as a kernel without arguments (found by a review).
      const KernelHandle as_kernel{nullptr, reinterpret_cast<CUkernel>(query.func)};
      const CUresult retried = param_info(as_kernel, index, &offset, &size);
      const char* name = nullptr;
      if (retried == CUDA_SUCCESS ||
          (retried == CUDA_ERROR_INVALID_VALUE &&
           api_.cu_kernel_get_name(&name, as_kernel.kern) == CUDA_SUCCESS)) {
        query = as_kernel;
        result = retried;
      }
    }
    if (result == CUDA_ERROR_INVALID_VALUE) {
      break;  // past the last argument
    }
    if (result != CUDA_SUCCESS) {
      detail::throw_cu_error(api_, result,
                             query.func != nullptr
                                 ? "cu_func_get_param_info(func, index, &offset, &size)"
                                 : "cu_kernel_get_param_info(kern, index, &offset, &size)",
                             __FILE__, __LINE__);
    }
    if (index >= kMaxParams) {
      throw Error("graphcheck: cuFuncGetParamInfo reported more than " +
                  std::to_string(kMaxParams) + " kernel arguments; refusing to read them");
    }
    layout.params.emplace_back(offset, size);
  }
  layout.name = kernel_name(query);
  return layouts_.emplace(key, std::move(layout)).first->second;
}

Node GraphReader::read_kernel(const CUDA_KERNEL_NODE_PARAMS& params,
                              const KernelHandle& layout_of) {
  const KernelLayout& kernel = layout(layout_of);
  Node node;
  node.type = NodeType::kKernel;
  node.name = kernel.name;
  node.params.reserve(kernel.params.size());
  const std::size_t count = kernel.params.size();
  if (count == 0) {
    return node;
  }
  if (params.kernelParams != nullptr) {
    for (std::size_t i = 0; i < count; ++i) {
      const auto [offset, size] = kernel.params[i];
      const auto* source = static_cast<const std::uint8_t*>(params.kernelParams[i]);
      if (source == nullptr && size != 0) {
        throw Error("graphcheck: kernel " + kernel.name + ": kernelParams[" + std::to_string(i) +
                    "] is null but the kernel takes " + std::to_string(count) + " arguments");
      }
      node.params.push_back(KernelParam{offset, std::vector<std::uint8_t>(source, source + size)});
    }
  } else if (params.extra != nullptr) {
    const std::uint8_t* buffer = nullptr;
    std::size_t buffer_size = 0;
    bool size_known = false;
    std::size_t e = 0;
    for (; option(params.extra[e]) != option(CU_LAUNCH_PARAM_END); e += 2) {
      if (e >= kMaxExtraEntries) {
        throw Error("graphcheck: kernel " + kernel.name +
                    ": the `extra` launch options are not terminated by CU_LAUNCH_PARAM_END");
      }
      if (option(params.extra[e]) == option(CU_LAUNCH_PARAM_BUFFER_POINTER)) {
        buffer = static_cast<const std::uint8_t*>(params.extra[e + 1]);
      } else if (option(params.extra[e]) == option(CU_LAUNCH_PARAM_BUFFER_SIZE)) {
        buffer_size = *static_cast<const std::size_t*>(params.extra[e + 1]);
        size_known = true;
      } else {
        throw Error("graphcheck: kernel " + kernel.name + ": unknown `extra` launch option " +
                    std::to_string(option(params.extra[e])) +
                    " (expected CU_LAUNCH_PARAM_BUFFER_POINTER, _SIZE or _END)");
      }
    }
    if (buffer == nullptr) {
      throw Error("graphcheck: kernel " + kernel.name +
                  ": `extra` has no CU_LAUNCH_PARAM_BUFFER_POINTER, so its arguments are unknown");
    }
    for (std::size_t i = 0; i < count; ++i) {
      const auto [offset, size] = kernel.params[i];
      if (size_known && (offset > buffer_size || size > buffer_size - offset)) {
        throw Error("graphcheck: kernel " + kernel.name + ": argument " + std::to_string(i) +
                    " spans bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset + size) + ") but the packed `extra` buffer holds " +
                    std::to_string(buffer_size) + " bytes");
      }
      node.params.push_back(
          KernelParam{offset, std::vector<std::uint8_t>(buffer + offset, buffer + offset + size)});
    }
  } else {
    throw Error("graphcheck: kernel " + kernel.name + " takes " + std::to_string(count) +
                " arguments but its node has neither kernelParams nor extra");
  }
  add_tensor_map_operands(node);
  return node;
}

Node GraphReader::read_kernel_or_unreadable(const CUDA_KERNEL_NODE_PARAMS& params,
                                            const KernelHandle& layout_of, std::uint64_t id) {
  try {
    Node node = read_kernel(params, layout_of);
    node.id = id;
    return node;
  } catch (const Error& error) {
    // One kernel graphcheck cannot read must not leave the rest of its graph unchecked.
    std::string name;
    if (layout_of.func != nullptr || layout_of.kern != nullptr) {
      name = kernel_name(layout_of);
    }
    std::string cause = error.what();
    if (constexpr std::string_view kPrefix = "graphcheck: "; cause.starts_with(kPrefix)) {
      cause.erase(0, kPrefix.size());
    }
    return unreadable_kernel(id, std::move(name), std::move(cause));
  }
}

Node GraphReader::unreadable_kernel(std::uint64_t id, std::string name, std::string cause) {
  Node node;
  node.id = id;
  node.type = NodeType::kKernel;
  node.name = name;
  unreadable_.push_back(UnreadableNode{id, std::move(name), std::move(cause)});
  return node;
}

void GraphReader::add_tensor_map_operands(Node& node) const {
  if (tensor_maps_.empty()) {
    return;
  }
  // CUtensorMap is alignas(64): a descriptor starts an argument or lies at a multiple of 64
  // bytes from the start of the struct holding it. Relative to the argument, not to the
  // packed buffer: on an H200 (driver 580) cuFuncGetParamInfo put a __grid_constant__
  // CUtensorMap at offset 112, so packed offsets are not 64-aligned (docs/cupti.md).
  constexpr std::size_t kAlign = 64;
  constexpr std::size_t kSize = TensorMapTable::kDescriptorSize;
  for (std::size_t p = 0; p < node.params.size(); ++p) {
    const KernelParam& param = node.params[p];
    for (std::size_t at = 0; at + kSize <= param.bytes.size(); at += kAlign) {
      if (const auto global = tensor_maps_.find(param.bytes.data() + at)) {
        // Read, as a snapshot spells every kernel operand (a TMA store cannot be told apart).
        node.operands.push_back(
            Operand{"param[" + std::to_string(p) + "]+" + std::to_string(at) + ":tensor_map",
                    *global, 0, Access::kRead});
      }
    }
  }
}

}  // namespace graphcheck::cupti
