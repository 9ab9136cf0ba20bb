// The replayable half of the ATen backend: the op sequence a capture window recorded, which
// `CapturedGraph::replay` re-executes on the captured storages the way a CUDA graph replays
// its kernels on the addresses it baked, without consulting the model.
#ifndef GRAPHCHECK_TORCH_CAPTURED_GRAPH_H_
#define GRAPHCHECK_TORCH_CAPTURED_GRAPH_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/intrusive_ptr.h>
#include <graphcheck/address.h>
#include <graphcheck/torch/weights_arena.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace graphcheck::libtorch {

namespace detail {
class GraphRecorder;
struct CapturedOp;
struct CapturedStorage;
struct Slot;
struct TensorRef;
}  // namespace detail

/// @brief The ops a `CaptureWindow` recorded at nesting depth 0 (an op's nested ops run inside
/// it on replay), each with its operator, its boxed inputs and its outputs, over the storages
/// the capture saw. Obtained from `CaptureRecord::replayable`.
///
/// Memory, as a CUDA graph has it:
/// - storages produced inside the window (graph-private: intermediates and outputs of the
///   recorded ops) are owned by this object, as a graph's private pool keeps them; the tensor
///   the captured forward returned shares its storage, so it is the graph's static output;
/// - storages that existed before the window (parameters, buffers, plain members, inputs,
///   runtime state) are not owned: only their address is baked. Inside the capture's
///   `WeightsArena` (`CaptureOptions::arena`) the replay reads whatever the arena now holds at
///   that address, through a view without a deleter (the arena's mapping is kept alive by this
///   object), so after a reload by rebinding the graph reads the old storage's address, not
///   the new parameter. Outside the arena the replay uses the storage itself while its weak
///   reference lives and still has its bytes at the captured address; once it is freed or
///   moved, `replay` throws (a real graph would read freed memory or fault).
///
/// Lifetime: keeps the graph-private storages and the arena mapping alive; never keeps a
/// pre-existing storage alive. Thread safety: `replay` must not run concurrently with itself,
/// with the accessors, or with code that writes the captured storages (as a graph replay on
/// one stream); the accessors alone may run concurrently on any thread.
class CapturedGraph {
 public:
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  CapturedGraph(CapturedGraph&&) = delete;
  CapturedGraph& operator=(CapturedGraph&&) = delete;
  ~CapturedGraph();

  /// @brief Re-executes every captured op, in order, through the dispatcher
  /// (`OperatorHandle::callBoxed`) under `at::NoGradGuard`, on tensors rebuilt over the
  /// captured storages with the captured sizes, strides, offsets and dtypes. Each result that
  /// is not an alias of the storage captured for it (views and in-place ops write there
  /// already) is copied into that captured storage, so later ops, and the caller's handle on
  /// the captured output, see the new values. Intermediates of nested ops are fresh per replay.
  /// @throws graphcheck::Error naming the op and the address if an op reads a pre-existing
  /// storage outside the arena that was freed or moved, if the arena sleeps (a graph would
  /// read unmapped memory), if an op could not be recorded for replay (sparse operands,
  /// tensors inside generic lists, an operator the dispatcher no longer knows), or if an op
  /// returns another shape than at capture (data-dependent shapes cannot be replayed).
  void replay();

  /// @brief Ops replayed (depth 0 only).
  [[nodiscard]] std::size_t op_count() const;
  /// @brief Operator names ("aten::mm") in replay order.
  [[nodiscard]] std::vector<std::string> op_names() const;
  /// @brief Bytes of the graph-private storages this object keeps alive.
  [[nodiscard]] std::uint64_t private_bytes() const;
  /// @brief Storages that existed before the window (not owned).
  [[nodiscard]] std::size_t preexisting_count() const;

 private:
  friend class detail::GraphRecorder;
  CapturedGraph();

  std::vector<detail::CapturedOp> ops_;
  std::vector<detail::CapturedStorage> storages_;
  ArenaMapping arena_;
};

namespace detail {

/// Where a storage a recorded op uses came from (the capture window classifies it).
enum class StorageOrigin : std::uint8_t {
  kGraph,        ///< produced inside the window: owned by the graph
  kPreexisting,  ///< existed before the window (external or declared input)
  kUnknown,      ///< the window has no extent for it (wrapper subclass): not replayable
};

/// Records the depth-0 ops of a capture window into a `CapturedGraph`. Fed every
/// RecordFunction start and end of the window's thread, strictly nested. Records without an
/// operator (user scopes) are transparent: the ops inside them count as depth 0.
class GraphRecorder {
 public:
  using Classify = c10::function_ref<StorageOrigin(const at::Tensor&)>;

  explicit GraphRecorder(ArenaMapping arena);
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;
  ~GraphRecorder();

  void on_start(const at::RecordFunction& fn, Classify classify);
  void on_end(const at::RecordFunction& fn, Classify classify);
  /// The graph; the recorder is empty afterwards.
  std::shared_ptr<CapturedGraph> finish();

 private:
  std::optional<TensorRef> ref_of(const at::Tensor& tensor, CapturedOp& op, Classify classify);
  Slot slot_of(const c10::IValue& value, CapturedOp& op, Classify classify);

  enum class Frame : std::uint8_t { kTransparent, kNested, kTop };
  std::vector<Frame> open_;
  std::size_t depth_ = 0;
  std::unique_ptr<CapturedGraph> graph_;
  std::unordered_map<const c10::StorageImpl*, std::int32_t> index_;
  std::unordered_map<const char*, std::optional<c10::OperatorHandle>> handles_;
};

}  // namespace detail
}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_CAPTURED_GRAPH_H_
