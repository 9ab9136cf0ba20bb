// What a captured graph records of each op, shared by its recording (graph_recorder.cc) and
// its replay (captured_graph.cc); CapturedGraph (captured_graph.h) holds them.
#ifndef GRAPHCHECK_TORCH_DETAIL_CAPTURED_OPS_H_
#define GRAPHCHECK_TORCH_DETAIL_CAPTURED_OPS_H_

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Storage.h>
#include <c10/util/SmallVector.h>
#include <graphcheck/address.h>
#include <graphcheck/torch/captured_graph.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphcheck::libtorch::detail {

// One tensor operand: the captured storage (index into the graph's table) and the view's
// geometry over it. `storage < 0`: the view reaches no byte; replay rebuilds it empty.
struct TensorRef {
  std::int32_t storage = -1;
  at::ScalarType dtype = at::kFloat;
  c10::Device device{c10::kCPU};
  std::int64_t offset = 0;
  c10::SmallVector<std::int64_t, 5> sizes;
  c10::SmallVector<std::int64_t, 5> strides;
  bool conj = false;  // lazy conjugate / negative views of complex tensors
  bool neg = false;
};

// One boxed argument or return. Tensors are kept as `TensorRef`s, never as tensors: a tensor
// would keep a pre-existing storage alive, which a graph does not.
struct Slot {
  enum class Kind : std::uint8_t { kValue, kTensor, kTensorList, kOptionalTensorList };
  Kind kind = Kind::kValue;
  c10::IValue value;                              // kValue: kept as boxed
  std::vector<std::optional<TensorRef>> tensors;  // kTensor: one; lists: one per element
};

struct CapturedOp {
  std::string name;
  std::optional<c10::OperatorHandle> handle;
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
  std::string unsupported;  // why the op cannot be replayed; empty if it can
};

struct CapturedStorage {
  StorageOrigin origin = StorageOrigin::kGraph;
  c10::Storage owned;  // kGraph: the graph's private memory
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> weak;  // kPreexisting
  Address begin = 0;
  void* data = nullptr;  // `begin` as a pointer: the address a graph bakes
  std::uint64_t size = 0;
  c10::Device device{c10::kCPU};
  bool in_arena = false;
  c10::Storage arena_view;  // kPreexisting in the arena: the baked address, no deleter
  std::string first_op;
};

}  // namespace graphcheck::libtorch::detail

#endif  // GRAPHCHECK_TORCH_DETAIL_CAPTURED_OPS_H_
