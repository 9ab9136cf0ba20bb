// The ATen backend: a capture window that records every dispatcher op of one thread with its
// tensor operands, the CPU-runnable twin of a CUDA graph capture (DESIGN.md, "The ATen
// backend").
#ifndef GRAPHCHECK_TORCH_ATEN_CAPTURE_H_
#define GRAPHCHECK_TORCH_ATEN_CAPTURE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/torch/captured_graph.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace graphcheck::libtorch {

class Registry;
class WeightsArena;

namespace detail {
struct CaptureState;
}  // namespace detail

/// @brief Whether a capture window keeps the op sequence for `CapturedGraph::replay`.
enum class ReplayOps : std::uint8_t {
  kKeep,  ///< keep it (`CaptureRecord::replayable`); the graph-private storages stay alive
  kDrop,  ///< record the graph for checking only (slightly cheaper; intermediates freed)
};

/// @brief Whether `CaptureWindow::finish` builds the record's op nodes.
enum class Nodes : std::uint8_t {
  kBuild,  ///< `CaptureRecord::graph.nodes` holds them
  kLater,  ///< left empty: `CaptureWindow::nodes()` builds them when they are needed (a
           ///< watch whose CUDA graph reader replaces them never needs them)
};

/// @brief How a capture window names what it records, and what it keeps for replay.
struct CaptureOptions {
  std::uint64_t graph_id = 1;     ///< `GraphRecord::id`
  std::string epoch = "capture";  ///< `GraphRecord::epoch`, the label of the capture epoch
  ReplayOps replay_ops = ReplayOps::kKeep;
  /// The weights arena the model loaded into, if any: a replay reads pre-existing storages
  /// inside it by their captured address whatever happened to them since (see
  /// `CapturedGraph`). May be null. The record keeps the arena's mapping alive.
  const WeightsArena* arena = nullptr;
};

/// @brief A storage that existed before the window and was used inside it: alive by
/// construction at capture. The weak reference tells later epochs whether it still lives.
struct ExternalStorage {
  Address begin = 0;
  std::uint64_t size = 0;
  std::string label;  ///< "aten:<op>" of the first op that used it
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;

  /// @brief True if the storage lives and still has its bytes at `begin` (not resized away).
  [[nodiscard]] bool alive() const;
};

/// @brief What a capture window recorded.
/// Thread safety: a value; the weak references may be queried from any thread.
struct CaptureRecord {
  /// One `op` node per dispatcher op, in start order (nested ops too); `reader`
  /// `kReaderAtenDispatcher`.
  GraphRecord graph;
  /// Storages produced inside the window (first seen as an output, or allocated while the
  /// window was open), merged into disjoint ranges: memory a CUDA graph would own.
  std::vector<Span> graph_spans;
  std::vector<Span> input_spans;          ///< declared static inputs (whole storages)
  std::vector<ExternalStorage> external;  ///< every other operand storage
  std::uint64_t operands = 0;             ///< operands recorded over all nodes
  /// Ops that ran on other threads the window's thread handed work to (at::launch tasks,
  /// autograd's threads): not recorded, so their operands are not in `graph` (their blocks
  /// are in `graph_spans`). Nonzero means the record misses reads.
  std::uint64_t foreign_ops = 0;
  /// False when a profiler held the thread's profiler slot as the window opened: the window
  /// then watched no allocation, so blocks allocated inside that no op returned (a kernel's
  /// workspace) are not in `graph_spans`, and a storage allocated inside and first seen as
  /// an op's input is `external`.
  bool allocations_watched = true;
  /// The depth-0 ops with their operands, ready to replay (null with `ReplayOps::kDrop`).
  /// Shared by copies of the record, as a graph handle is.
  std::shared_ptr<CapturedGraph> replayable;
};

/// @brief RAII: while it lives (and until `finish`), every dispatcher op that runs on the
/// constructing thread is recorded as an `op` node ("reads[i]" for tensor inputs, "writes[i]"
/// for tensor outputs, each the view's extent; tensor lists, optional tensor lists, tuples and
/// generic lists are walked recursively; zero-byte views, meta and non-strided tensors are
/// skipped). With `ReplayOps::kKeep` the ops at nesting depth 0 are also kept with their
/// operator and boxed operands as a `CapturedGraph`.
///
/// Uses a thread-local `at::RecordFunction` callback (scope FUNCTION, inputs and outputs) and,
/// to know which storages were allocated inside the window, installs a memory-reporting
/// `c10::DebugInfoGuard` (PROFILER_STATE), unless a profiler already holds that slot on this
/// thread (`CaptureRecord::allocations_watched`). A profiler started on this thread while the
/// window is open finds the slot taken and refuses to start (torch: "Profiler is already
/// enabled on this thread").
///
/// Thread safety: one window per thread; ops on other threads are not recorded (those on
/// threads torch hands the window's thread-local state to are counted: `foreign_ops`), but
/// the blocks those threads allocate while the window is open are its. `finish` runs
/// on the constructing thread. Destroyed on another thread (a capture that ended elsewhere, a
/// watch closed from another thread), an open window is abandoned, not freed: the constructing
/// thread still points at it, so that thread frees it at its next op or its next window, and
/// records nothing more meanwhile. Not copyable or movable.
class CaptureWindow {
 public:
  /// @throws graphcheck::Error if this thread already has an open window.
  explicit CaptureWindow(CaptureOptions options = {});
  CaptureWindow(const CaptureWindow&) = delete;
  CaptureWindow& operator=(const CaptureWindow&) = delete;
  CaptureWindow(CaptureWindow&&) = delete;
  CaptureWindow& operator=(CaptureWindow&&) = delete;
  ~CaptureWindow();

  /// @brief Declares `tensor`'s storage a static input or output of the graph.
  /// @throws graphcheck::Error if `tensor` has no readable storage, or after `finish`.
  void declare_input(std::string name, const at::Tensor& tensor,
                     std::string reason = "static graph input");

  /// @brief Stops recording and returns the record. Ops after this are not recorded.
  /// With `Nodes::kLater` the record's `graph.nodes` stays empty and the window keeps its
  /// op log for `nodes()` (everything else of the record is complete).
  /// @throws graphcheck::Error if called twice, or on another thread than the constructor's.
  CaptureRecord finish(Nodes nodes = Nodes::kBuild);

  /// @brief The op nodes of a window finished with `Nodes::kLater`, built now (each call
  /// builds them again; empty after `finish(Nodes::kBuild)`). Callable from any thread.
  /// @throws graphcheck::Error before `finish`.
  [[nodiscard]] NodeList nodes() const;

  /// @brief Ops recorded so far.
  [[nodiscard]] std::uint64_t op_count() const;

 private:
  std::unique_ptr<detail::CaptureState> state_;
};

/// @brief The epoch at this moment: `registry.spans()` (parameters, buffers, runtime, inputs),
/// the record's input and graph spans (a graph keeps its private memory in every epoch), the
/// arena's live allocations, and every external storage of the record that is still alive and
/// outside the arena, as an allocation (pool "default", generation 1: the default allocator
/// never discards bytes behind a live storage, label "aten:<op>").
/// @param arena may be null (no weights arena).
/// Thread safety: reads the registry's and record's tensors; see `Registry`.
[[nodiscard]] Epoch make_epoch(const std::string& label, const Registry& registry,
                               const WeightsArena* arena, const CaptureRecord& record);

/// @brief The capture epoch (labelled `record.graph.epoch`): as `make_epoch`, except that every
/// external storage is included, alive or not (each was alive while the window used it), so
/// an unknown tensor reads as unregistered, never dangling.
[[nodiscard]] Epoch make_capture_epoch(const Registry& registry, const WeightsArena* arena,
                                       const CaptureRecord& record);

/// @brief `make_epoch` and `make_capture_epoch` with the registry's spans given: a caller that
/// builds many epochs of one unchanged registry computes `Registry::spans()` once (the watch's
/// captures of one model) and passes them here, in the order `spans()` gives.
[[nodiscard]] Epoch make_epoch(const std::string& label, std::vector<Span> registry_spans,
                               const WeightsArena* arena, const CaptureRecord& record);
[[nodiscard]] Epoch make_capture_epoch(std::vector<Span> registry_spans, const WeightsArena* arena,
                                       const CaptureRecord& record);

/// @brief A snapshot (version 1, producer backend "aten") of one capture and its epochs.
[[nodiscard]] Snapshot make_snapshot(const CaptureRecord& record, std::vector<Epoch> epochs);

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_ATEN_CAPTURE_H_
