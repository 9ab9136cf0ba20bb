// Recording a captured graph (GraphRecorder): each op the ATen window sees, its operands as
// views of the storages it first met. Replaying it is captured_graph.cc.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/DispatchKeySet.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/captured_graph.h>
#include <graphcheck/torch/registry.h>

#include <optional>
#include <string>
#include <utility>

#include "graphcheck/torch/detail/captured_ops.h"

namespace graphcheck::libtorch {
namespace detail {
namespace {

// vmap's batched tensor: no storage of its own, and the batching rule runs the op again,
// through the dispatcher, on the tensor it wraps. (torch.func.grad's wrapper is not one of
// these: its ops do not all reach the dispatcher again, so they stay unsupported.)
bool transform_wrapped(const at::Tensor& tensor) {
  return tensor.defined() && tensor.key_set().has(c10::DispatchKey::FuncTorchBatched);
}

bool holds_wrapped(const c10::IValue& value) {
  if (value.isTensor()) {
    return transform_wrapped(value.toTensor());
  }
  if (value.isTensorList()) {
    for (const at::Tensor& tensor : value.toTensorList()) {
      if (transform_wrapped(tensor)) {
        return true;
      }
    }
  } else if (value.isOptionalTensorList()) {
    const c10::List<std::optional<at::Tensor>> list = value.toOptionalTensorList();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::optional<at::Tensor> tensor = list.get(i);
      if (tensor && transform_wrapped(*tensor)) {
        return true;
      }
    }
  }
  return false;
}

bool holds_tensor(const c10::IValue& value) {
  if (value.isTensor()) {
    return true;
  }
  if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) {
      if (holds_tensor(element)) {
        return true;
      }
    }
  } else if (value.isTuple()) {
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      if (holds_tensor(element)) {
        return true;
      }
    }
  }
  return false;
}

void mark_unsupported(CapturedOp& op, const std::string& why) {
  if (op.unsupported.empty()) {
    op.unsupported = why;
  }
}

}  // namespace

GraphRecorder::GraphRecorder(ArenaMapping arena) : graph_(new CapturedGraph()) {
  graph_->arena_ = std::move(arena);
  open_.reserve(64);
}

GraphRecorder::~GraphRecorder() = default;

std::optional<TensorRef> GraphRecorder::ref_of(const at::Tensor& tensor, CapturedOp& op,
                                               Classify classify) {
  if (!tensor.defined()) {
    return std::nullopt;
  }
  const auto extent = storage_extent(tensor);
  if (!extent) {
    mark_unsupported(op,
                     "an operand without readable strided storage (sparse, mkldnn, nested "
                     "or a wrapper subclass)");
    return std::nullopt;
  }
  if (tensor.is_quantized()) {
    // Its quantizer (scale, zero point) lives in the tensor's QTensorImpl, which a replay's
    // plain view over the storage does not have: a quantized kernel then read a quantizer
    // that was not there (a segmentation fault).
    mark_unsupported(op, "a quantized operand (its quantizer is not recorded)");
    return std::nullopt;
  }
  TensorRef ref;
  ref.dtype = tensor.scalar_type();
  ref.device = tensor.device();
  ref.offset = tensor.storage_offset();
  ref.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  ref.strides.assign(tensor.strides().begin(), tensor.strides().end());
  ref.conj = tensor.is_conj();
  ref.neg = tensor.is_neg();
  if (extent->view_end <= extent->view_begin || extent->storage_begin == 0) {
    return ref;  // reaches no byte: rebuilt empty on replay
  }
  const auto* impl = static_cast<const c10::StorageImpl*>(extent->identity);
  const auto [found, inserted] =
      index_.try_emplace(impl, static_cast<std::int32_t>(graph_->storages_.size()));
  if (inserted) {
    CapturedStorage storage;
    storage.origin = classify(tensor);
    storage.begin = extent->storage_begin;
    storage.data = tensor.storage().data_ptr().get();
    storage.size = extent->storage_size;
    storage.device = tensor.device();
    storage.first_op = op.name;
    if (storage.origin == StorageOrigin::kGraph) {
      storage.owned = tensor.storage();
    } else {
      storage.weak = tensor.storage().getWeakStorageImpl();
      storage.in_arena = graph_->arena_.contains(storage.begin);
    }
    graph_->storages_.push_back(std::move(storage));
  }
  if (graph_->storages_[static_cast<std::size_t>(found->second)].origin ==
      StorageOrigin::kUnknown) {
    mark_unsupported(op, "an operand whose storage the capture window could not classify");
  }
  ref.storage = found->second;
  return ref;
}

Slot GraphRecorder::slot_of(const c10::IValue& value, CapturedOp& op, Classify classify) {
  Slot slot;
  if (value.isTensor() && value.toTensor().defined() && !value.toTensor().is_meta()) {
    slot.kind = Slot::Kind::kTensor;
    slot.tensors.push_back(ref_of(value.toTensor(), op, classify));
  } else if (value.isTensorList()) {
    slot.kind = Slot::Kind::kTensorList;
    for (const at::Tensor& tensor : value.toTensorList()) {
      slot.tensors.push_back(ref_of(tensor, op, classify));
    }
  } else if (value.isOptionalTensorList()) {
    slot.kind = Slot::Kind::kOptionalTensorList;
    const c10::List<std::optional<at::Tensor>> list = value.toOptionalTensorList();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::optional<at::Tensor> tensor = list.get(i);
      slot.tensors.push_back(tensor ? ref_of(*tensor, op, classify) : std::nullopt);
    }
  } else if (!value.isTensor() && holds_tensor(value)) {
    mark_unsupported(op, "tensors inside a generic list or tuple");
  } else {
    slot.value = value;  // a scalar, list of scalars, None, an undefined or a meta tensor
  }
  return slot;
}

void GraphRecorder::on_start(const at::RecordFunction& fn, Classify classify) {
  if (depth_ > 0) {
    open_.push_back(Frame::kNested);
    ++depth_;
    return;
  }
  // Operators are keyed by their schema's name pointer (stable while the operator is
  // registered): one dispatcher lookup per operator and window. A miss may be a user scope
  // (no operator): those are not cached, their name strings die with the record.
  auto found = handles_.find(fn.name());
  if (found == handles_.end()) {
    const auto name = fn.operator_name();
    if (!name) {
      open_.push_back(Frame::kTransparent);  // a user scope: its ops stay at depth 0
      return;
    }
    found = handles_.emplace(fn.name(), c10::Dispatcher::singleton().findOp(*name)).first;
  }
  // An op on vmap's batched tensors is replayed through the ops its batching rule runs on
  // the tensors they wrap, as a graph would have captured those: its frame is transparent,
  // they are at depth 0.
  const auto& inputs = fn.inputs();
  if (std::any_of(inputs.begin(), inputs.end(), holds_wrapped)) {
    open_.push_back(Frame::kTransparent);
    return;
  }
  open_.push_back(Frame::kTop);
  ++depth_;
  CapturedOp& op = graph_->ops_.emplace_back();
  op.name = fn.name();
  op.handle = found->second;
  if (!op.handle) {
    mark_unsupported(op, "the dispatcher does not know the operator");
  }
  op.inputs.reserve(fn.inputs().size());
  for (const c10::IValue& input : fn.inputs()) {
    op.inputs.push_back(slot_of(input, op, classify));
  }
}

void GraphRecorder::on_end(const at::RecordFunction& fn, Classify classify) {
  if (open_.empty()) {
    return;
  }
  const Frame frame = open_.back();
  open_.pop_back();
  if (frame == Frame::kTransparent) {
    return;
  }
  --depth_;
  if (frame == Frame::kTop) {
    CapturedOp& op = graph_->ops_.back();
    for (const c10::IValue& output : fn.outputs()) {
      op.outputs.push_back(slot_of(output, op, classify));
    }
  }
}

std::shared_ptr<CapturedGraph> GraphRecorder::finish() {
  index_.clear();
  handles_.clear();
  open_.clear();
  depth_ = 0;
  return std::shared_ptr<CapturedGraph>(std::move(graph_));
}

}  // namespace detail
}  // namespace graphcheck::libtorch
