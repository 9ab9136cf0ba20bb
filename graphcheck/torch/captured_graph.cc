// Replaying a captured graph (CapturedGraph): each op again through the dispatcher, on views
// of the storages it captured. Recording it is graph_recorder.cc.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/TensorOptions.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/captured_graph.h>
#include <graphcheck/torch/registry.h>

#include <algorithm>
#include <string_view>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <unordered_set>
#include <utility>

#include "graphcheck/torch/detail/captured_ops.h"

namespace graphcheck::libtorch {
namespace detail {

namespace {

std::string describe(std::size_t index, const CapturedOp& op) {
  return "op " + std::to_string(index) + " (" + op.name + ")";
}

at::Tensor make_view(const c10::Storage& storage, const TensorRef& ref) {
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage),
      c10::DispatchKeySet(c10::computeDispatchKey(ref.dtype, at::kStrided, ref.device)),
      c10::scalarTypeToTypeMeta(ref.dtype));
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(ref.sizes, ref.strides, ref.offset);
  impl->_set_conj(ref.conj);
  impl->_set_neg(ref.neg);
  return tensor;
}

// Ops that only allocate: their output holds whatever code outside the dispatcher wrote into
// it at capture (`torch.tensor(data)` is `aten::empty`, then a plain memcpy). A CUDA graph has
// no kernel for them, so its memory keeps those bytes; replaying them would copy fresh
// uninitialized memory over the captured values.
bool allocates_only(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "aten::empty",     "aten::empty_strided",     "aten::empty_like",
      "aten::new_empty", "aten::new_empty_strided", "aten::empty_permuted"};
  return names.count(name) != 0;
}

}  // namespace

// Resolves the storages of one replay: each storage once, in the op that first needs it.
class ReplayContext {
 public:
  explicit ReplayContext(std::vector<CapturedStorage>& storages) : storages_(storages) {
    live_.resize(storages.size());
  }

  const c10::Storage& storage(std::int32_t index, std::size_t op_index, const CapturedOp& op) {
    const auto at = static_cast<std::size_t>(index);
    if (live_[at]) {
      return live_[at];
    }
    CapturedStorage& captured = storages_[at];
    if (captured.origin == StorageOrigin::kGraph) {
      // The graph holds its own memory, but its storage object is shared with the tensors
      // the capture returned: `output.untyped_storage().resize_(0)` (how FSDP and engines
      // free a tensor's memory) leaves it without the bytes the ops write (a hostile tester
      // crashed the replay so).
      if (reinterpret_cast<Address>(captured.owned.data_ptr().get()) != captured.begin ||
          captured.owned.nbytes() < captured.size) {
        throw Error("CapturedGraph::replay: " + describe(op_index, op) + " uses " +
                    std::to_string(captured.size) + " bytes of the graph's own memory at " +
                    format_address(captured.begin) + " (first used by " + captured.first_op +
                    "), whose storage was freed or resized since the capture (" +
                    std::to_string(captured.owned.nbytes()) + " bytes now); a CUDA graph " +
                    "replayed now would write freed memory. Leave the graph's outputs' storage " +
                    "as the capture made it while the graph lives, or capture again");
      }
      live_[at] = captured.owned;
    } else if (captured.in_arena) {
      if (!captured.arena_view) {
        captured.arena_view = c10::Storage(c10::Storage::use_byte_size_t(), captured.size,
                                           c10::DataPtr(captured.data, captured.device),
                                           /*allocator=*/nullptr, /*resizable=*/false);
      }
      live_[at] = captured.arena_view;
    } else {
      c10::intrusive_ptr<c10::StorageImpl> strong = captured.weak->lock();
      if (!strong || reinterpret_cast<Address>(strong->data_ptr().get()) != captured.begin ||
          strong->nbytes() < captured.size) {
        throw Error("CapturedGraph::replay: " + describe(op_index, op) + " reads " +
                    std::to_string(captured.size) + " bytes at " + format_address(captured.begin) +
                    " (a storage that existed before the capture, first used by " +
                    captured.first_op + ") that has been freed or moved since; a CUDA graph " +
                    "replayed now would read freed memory. Keep the tensor alive and in place " +
                    "while the graph lives (reload with copy_, not by rebinding), or capture " +
                    "again");
      }
      live_[at] = c10::Storage(std::move(strong));
    }
    return live_[at];
  }

  at::Tensor tensor(const TensorRef& ref, std::size_t op_index, const CapturedOp& op) {
    if (ref.storage < 0) {
      return at::empty_strided(ref.sizes, ref.strides,
                               at::TensorOptions().dtype(ref.dtype).device(ref.device));
    }
    return make_view(storage(ref.storage, op_index, op), ref);
  }

  c10::IValue value(const Slot& slot, std::size_t op_index, const CapturedOp& op) {
    switch (slot.kind) {
      case Slot::Kind::kValue:
        return slot.value;
      case Slot::Kind::kTensor:
        return tensor(*slot.tensors.front(), op_index, op);
      case Slot::Kind::kTensorList: {
        c10::List<at::Tensor> list;
        list.reserve(slot.tensors.size());
        for (const auto& ref : slot.tensors) {
          list.push_back(ref ? tensor(*ref, op_index, op) : at::Tensor());
        }
        return list;
      }
      case Slot::Kind::kOptionalTensorList: {
        c10::List<std::optional<at::Tensor>> list;
        list.reserve(slot.tensors.size());
        for (const auto& ref : slot.tensors) {
          list.push_back(ref ? std::optional<at::Tensor>(tensor(*ref, op_index, op))
                             : std::nullopt);
        }
        return list;
      }
    }
    return slot.value;
  }

  // Copies `result` into the storage captured for it, unless the op wrote there already.
  void write_back(const std::optional<TensorRef>& ref, const at::Tensor& result,
                  std::size_t op_index, const CapturedOp& op) {
    if (!ref || ref->storage < 0 || !result.defined()) {
      return;
    }
    const at::Tensor captured = tensor(*ref, op_index, op);
    if (result.is_alias_of(captured)) {
      return;  // a view or an in-place result: the op wrote the captured storage itself
    }
    if (result.sizes() != captured.sizes()) {
      throw Error("CapturedGraph::replay: " + describe(op_index, op) + " returned shape " +
                  c10::str(result.sizes()) + " where the capture returned " +
                  c10::str(captured.sizes()) +
                  "; data-dependent shapes cannot be replayed (a CUDA graph cannot capture "
                  "them either): keep such ops outside the capture window");
    }
    captured.copy_(result);
  }

 private:
  std::vector<CapturedStorage>& storages_;
  std::vector<c10::Storage> live_;
};

// The TorchScript name of c10d's Work: what an asynchronous collective op returns.
constexpr std::string_view kWorkType = "__torch__.torch.classes.c10d.Work";

// An asynchronous collective (c10d::allreduce_ and the others a tensor-parallel forward runs)
// returns its Work, and the eager caller waits on it before it reads the result: the replay
// waits too, before the next op reads what the collective writes.
void wait_for_collectives(const std::vector<c10::IValue>& stack) {
  for (const c10::IValue& value : stack) {
    if (value.isCustomClass() && value.type()->str() == kWorkType) {
      value.toCustomClass<c10d::Work>()->wait();
    }
  }
}

}  // namespace detail

CapturedGraph::CapturedGraph() = default;
CapturedGraph::~CapturedGraph() = default;

void CapturedGraph::replay() {
  if (arena_.asleep()) {
    throw Error(
        "CapturedGraph::replay: the weights arena is asleep; a graph replayed now would read "
        "discarded memory. Call WeightsArena::wake_up() first");
  }
  const at::NoGradGuard no_grad;
  detail::ReplayContext context(storages_);
  std::vector<c10::IValue> stack;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const detail::CapturedOp& op = ops_[i];
    if (detail::allocates_only(op.name)) {
      continue;
    }
    if (!op.unsupported.empty()) {
      throw Error("CapturedGraph::replay: " + detail::describe(i, op) +
                  " was not recorded for replay: " + op.unsupported +
                  "; keep it outside the capture window");
    }
    stack.clear();
    for (const detail::Slot& slot : op.inputs) {
      stack.push_back(context.value(slot, i, op));
    }
    op.handle->callBoxed(stack);
    detail::wait_for_collectives(stack);
    if (stack.size() != op.outputs.size()) {
      throw Error("CapturedGraph::replay: " + detail::describe(i, op) + " returned " +
                  std::to_string(stack.size()) + " values where the capture saw " +
                  std::to_string(op.outputs.size()));
    }
    for (std::size_t j = 0; j < stack.size(); ++j) {
      const detail::Slot& slot = op.outputs[j];
      if (slot.kind == detail::Slot::Kind::kTensor && stack[j].isTensor()) {
        context.write_back(slot.tensors.front(), stack[j].toTensor(), i, op);
      } else if (slot.kind == detail::Slot::Kind::kTensorList && stack[j].isTensorList()) {
        const c10::List<at::Tensor> results = stack[j].toTensorList();
        for (std::size_t k = 0; k < results.size() && k < slot.tensors.size(); ++k) {
          context.write_back(slot.tensors[k], results.get(k), i, op);
        }
      }
    }
  }
}

std::size_t CapturedGraph::op_count() const { return ops_.size(); }

std::vector<std::string> CapturedGraph::op_names() const {
  std::vector<std::string> names;
  names.reserve(ops_.size());
  for (const auto& op : ops_) {
    names.push_back(op.name);
  }
  return names;
}

std::uint64_t CapturedGraph::private_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& storage : storages_) {
    bytes += storage.origin == detail::StorageOrigin::kGraph ? storage.size : 0;
  }
  return bytes;
}

std::size_t CapturedGraph::preexisting_count() const {
  std::size_t count = 0;
  for (const auto& storage : storages_) {
    count += storage.origin == detail::StorageOrigin::kPreexisting ? 1 : 0;
  }
  return count;
}
}  // namespace graphcheck::libtorch
