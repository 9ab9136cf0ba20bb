// Graph capture through CUPTI: which graphs exist, what each node of them reads and writes.
#ifndef GRAPHCHECK_CUPTI_GRAPH_CAPTURE_H_
#define GRAPHCHECK_CUPTI_GRAPH_CAPTURE_H_

#include <cuda.h>
#include <cupti.h>
#include <graphcheck/graph.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cupti/created_nodes.h"
#include "cupti/dispatcher.h"
#include "cupti/driver_api.h"
#include "cupti/graph_reader.h"
#include "cupti/tensor_maps.h"

namespace graphcheck::cupti {

/// @brief Options of a `GraphCapture`.
struct GraphCaptureOptions {
  /// The epoch label new records get (`GraphRecord::epoch`); see `set_epoch`.
  std::string epoch = "capture";
  /// Whether the records of destroyed exec graphs are kept for `take_retired` (the backend
  /// takes them at each destroy callback); off, they are dropped.
  bool keep_retired = false;
};

/// @brief Counters, for tests, docs and the GPU check ("did CUPTI send what we expect?").
struct GraphCaptureStats {
  std::uint64_t nodes_created = 0;  ///< GRAPHNODE_CREATED callbacks
  /// Of those, the ones fired inside an instantiate call on its thread (not noted: the nodes
  /// of the exec graph's own copy, whose graph handle is never read).
  std::uint64_t nodes_created_instantiating = 0;
  /// GRAPHNODE_CREATED notes kept now, over every graph (bounded by the graphs alive).
  std::uint64_t nodes_noted = 0;
  std::uint64_t graphs_cloned = 0;    ///< GRAPH_CLONED callbacks
  std::uint64_t execs_created = 0;    ///< GRAPHEXEC_CREATED callbacks
  std::uint64_t execs_destroyed = 0;  ///< GRAPHEXEC_DESTROY_STARTING callbacks
  std::uint64_t graphs_walked = 0;    ///< template graphs read (instantiate, or on demand)
  std::uint64_t exec_updates = 0;     ///< exec-graph parameter updates applied
  std::uint64_t node_update_events =
      0;                          ///< resource callbacks 22/23 (GRAPH_NODE_UPDATED/SET_PARAMS)
  std::uint64_t tensor_maps = 0;  ///< cuTensorMapEncode*/ReplaceAddress calls recorded
  /// Instantiate EXITs whose GRAPHEXEC_CREATED named the same template graph (`graph`
  /// field) as the call's arguments, or another one (an internal clone, or none): evidence
  /// for which CUpti_GraphData fields CUPTI fills in [verify].
  std::uint64_t exec_templates_matched = 0;
  std::uint64_t exec_templates_differed = 0;
  /// Runtime kernel setters (cudaGraphExec(Kernel)NodeSetParams) whose EXIT came with no
  /// driver setter's EXIT inside on its thread: their nodes are left not checked. Evidence
  /// for whether CUPTI reports the driver call a runtime call makes [verify].
  std::uint64_t runtime_kernel_setters_alone = 0;
};

/// @brief The record of an exec graph being destroyed, with its "not checked: " lines
/// (`GraphCapture::take_retired`).
struct RetiredGraph {
  CUgraphExec exec = nullptr;
  std::shared_ptr<const GraphRecord> record;
  std::vector<std::string> warnings;
};

/// @brief Builds a `GraphRecord` for every captured and every instantiated CUDA graph.
///
/// How (see docs/cupti.md): resource callbacks only note handles (nodes created with their
/// types, exec graphs created or destroyed). At the API EXIT of stream-capture end
/// (cuStreamEndCapture, cudaStreamEndCapture) the captured graph is noted, not read; at the
/// API EXIT of every instantiate call (cuGraphInstantiate*, cudaGraphInstantiate*) the
/// template graph, still alive there even when PyTorch destroys it right after, is read into
/// the exec graph's record: once per node, with the node types the callbacks gave
/// (`CreatedNodes`). A captured graph's own record is read when `captured_graphs` or
/// `warnings` asks for it (nothing checks template graphs: their exec graphs hold the same
/// nodes). Conditional bodies are noted at cuGraphAddNode EXIT. Updates of an
/// instantiated graph (cuGraphExecKernelNodeSetParams, cuGraphExecNodeSetParams,
/// cuGraphExecMemcpy/MemsetNodeSetParams, cuGraphExecChildGraphNodeSetParams,
/// cuGraphExecUpdate and the runtime forms) are applied at their API EXIT when they return
/// success, from the parameters the caller passed (still valid inside the call; the template
/// node keeps its old parameters, and there is no getter for an exec node's parameters).
/// Nodes disabled in an exec graph (cuGraphNodeSetEnabled, cudaGraphNodeSetEnabled, at
/// EXIT) keep their parameters in the record but yield no reference while disabled: the
/// published record leaves their references out and the graph's warnings carry a "note: "
/// line per disabled node (they are skipped, not findings).
/// TMA descriptors from cuTensorMapEncode*/cuTensorMapReplaceAddress are remembered so a
/// kernel argument holding one gets an operand "param[i]+off:tensor_map" for its address.
///
/// Record ids: an exec graph's record has CUPTI's graph-exec id (`cuptiGetGraphExecId`), a
/// captured graph's record CUPTI's graph id; node ids are `cuptiGetGraphNodeId` of the
/// template node. Records are immutable once published (an update publishes a new one).
///
/// Thread safety: all methods may be called from any thread; state is guarded by a mutex
/// that no per-launch callback takes (this handler enables no launch callbacks). Reading a
/// graph calls the driver with that mutex held, so resource callbacks, which the driver
/// fires from inside its own calls (and possibly under its own locks), never wait for it:
/// when it is busy they queue their event, and every holder applies the queue, in order,
/// right after locking and again before unlocking.
/// Lifetime: `api` must outlive this object.
class GraphCapture final : public CallbackHandler {
 public:
  explicit GraphCapture(DriverApi& api, GraphCaptureOptions options = {});

  [[nodiscard]] std::vector<CallbackId> callbacks() const override;
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) override;

  /// @brief The record of a live exec graph, or null if it was not seen being instantiated.
  [[nodiscard]] std::shared_ptr<const GraphRecord> exec_graph(CUgraphExec exec) const;
  /// @brief Records of all live exec graphs, by ascending id.
  [[nodiscard]] std::vector<std::shared_ptr<const GraphRecord>> exec_graphs() const;
  /// @brief Records of captured (template) graphs not yet destroyed, by ascending id; each
  /// is read at its first call after its capture ended (its nodes as they are then).
  /// @throws Error naming the failing driver call when one cannot be read (it is dropped).
  [[nodiscard]] std::vector<std::shared_ptr<const GraphRecord>> captured_graphs() const;

  /// @brief One line per kernel node of the exec graph whose record has id `id` (CUPTI's
  /// graph-exec id) that is in the record without its arguments, because they could not be
  /// read: the report's `warnings` (the node yields no reference). Empty when none.
  [[nodiscard]] std::vector<std::string> exec_warnings(std::uint64_t id) const;
  /// @brief Those lines for every live record: captured graphs by id (read now if not yet:
  /// throws as `captured_graphs`), then exec graphs.
  [[nodiscard]] std::vector<std::string> warnings() const;

  /// @brief The records of exec graphs whose GRAPHEXEC_DESTROY_STARTING came since the last
  /// call, in order, with their warning lines (the backend checks them: issue 18). Never
  /// waits for the state lock (a resource callback calls it; cupti/lock_order.h).
  [[nodiscard]] std::vector<RetiredGraph> take_retired();

  /// @brief Reads `graph` now (late attach, `keep_graph=True` users, tests); throws
  /// `graphcheck::Error` naming the failing driver call.
  [[nodiscard]] GraphRecord read_graph(CUgraph graph, std::uint64_t id);

  /// @brief Drops every cached kernel layout at the next read, as a module unload does: call
  /// it when the callbacks were off for a while (an unload then went unseen, and a reused
  /// function handle would be read with the unloaded kernel's layout). Thread-safe.
  void forget_layouts() { unloads_.fetch_add(1, std::memory_order_acq_rel); }

  /// @brief The epoch label later records get (earlier records keep theirs).
  void set_epoch(std::string label);
  [[nodiscard]] GraphCaptureStats stats() const;

 private:
  struct ExecState {
    CUgraph source = nullptr;  // template graph it was instantiated from (may be destroyed)
    std::shared_ptr<const GraphRecord> record;  // every node as the exec graph holds it
    // `record` without the references of disabled nodes: what is checked and published
    // (the same object when none is disabled).
    std::shared_ptr<const GraphRecord> checked;
    NodeIndex index;  // template node -> position in record->nodes
    std::map<std::uint64_t, UnreadableNode> unreadable;  // by node id
    std::set<std::vector<std::uint32_t>> disabled;       // paths (cuGraphNodeSetEnabled 0)
  };

  // One resource callback, as much of it as applying it later needs.
  struct ResourceEvent {
    CUpti_CallbackId cbid = 0;
    CUgraph graph = nullptr;
    CUgraphNode node = nullptr;
    CUgraphExec exec = nullptr;
    std::thread::id thread;  // the thread of the driver call that fired it
  };
  // A graph whose stream capture ended: read on demand (`read_captured_locked`).
  struct Captured {
    std::uint32_t id = 0;
    std::string epoch;                          // the epoch label at its capture end
    std::shared_ptr<const GraphRecord> record;  // null until read
  };
  // A GRAPHEXEC_CREATED not yet read: on the thread that instantiates, at its next
  // instantiate EXIT (another thread's instantiation may still be running: CUDA forbids
  // using one graph from two threads at once).
  struct PendingExec {
    CUgraphExec exec = nullptr;
    CUgraph graph = nullptr;
    std::thread::id thread;
  };
  // Holds mutex_ and applies the queued resource events after locking and before unlocking.
  class StateLock {
   public:
    // Const queries lock too: applying queued events catches up with what already
    // happened (a destroyed exec graph must not be reported), it changes nothing visible.
    explicit StateLock(const GraphCapture& capture);
    // Takes mutex_ only if it is free; `owns()` says whether it did.
    StateLock(const GraphCapture& capture, std::try_to_lock_t /*unused*/);
    ~StateLock();
    StateLock(const StateLock&) = delete;
    StateLock& operator=(const StateLock&) = delete;
    [[nodiscard]] bool owns() const { return owns_; }

   private:
    GraphCapture& capture_;
    bool owns_ = true;
  };

  void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData& data);
  void apply_locked(const ResourceEvent& event);
  void drain_locked();
  void on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData& data);
  void on_runtime_api(CUpti_CallbackId cbid, const CUpti_CallbackData& data);
  // graph_capture_updates.cc: updates of instantiated graphs (driver and runtime forms).
  void on_driver_exec_update(CUpti_CallbackId cbid, const CUpti_CallbackData& data);
  void on_runtime_exec_update(CUpti_CallbackId cbid, const CUpti_CallbackData& data);

  // After any change of `state`: derives its checked record and copies it, with its warning
  // lines, where `take_retired` finds them.
  void publish_locked(CUgraphExec exec, ExecState& state);
  // cuGraphNodeSetEnabled (graph_capture_updates.cc).
  void node_enabled(CUgraphExec exec, CUgraphNode node, bool enabled);
  [[nodiscard]] static std::vector<std::string> warning_lines(const ExecState& state);
  void captured(CUgraph graph);
  // Reads the captured graphs not read yet (graph_capture_captured.cc).
  void read_captured_locked() const;
  void instantiated(CUgraphExec exec, CUgraph graph);
  void instantiated_locked(CUgraphExec exec, CUgraph graph);
  void tensor_map_encoded(const CUtensorMap* map, const void* global);
  void conditional_added(CUgraphNode node, CUgraph graph, const CUgraphNodeParams& params);
  void exec_updated(CUgraphExec exec, CUgraph graph);
  // A driver kernel setter: the new parameters read with their own function's layout.
  void exec_kernel_updated(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS& p);
  // A runtime kernel setter's EXIT (`call` names it): nothing when this thread's driver
  // setter inside it already applied it, else the node is kept without arguments, reported.
  void runtime_kernel_updated(CUgraphExec exec, CUgraphNode node, const char* call);
  void exec_memcpy_updated(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D& copy);
  void exec_memset_updated(CUgraphExec exec, CUgraphNode node,
                           const CUDA_MEMSET_NODE_PARAMS& memset);
  void exec_child_updated(CUgraphExec exec, CUgraphNode node, CUgraph child);
  void exec_batch_mem_op_updated(CUgraphExec exec, CUgraphNode node,
                                 const CUstreamBatchMemOpParams* ops, unsigned int count);
  // Replaces one node of an exec record (copy-on-write); `update` edits the copy.
  template <typename Update>
  void update_exec_node(CUgraphExec exec, CUgraphNode node, Update&& update);

  DriverApi& api_;
  mutable std::mutex mutex_;
  // Resource events that found mutex_ busy, and the published and retired exec records.
  // queue_mutex_ is never held across a driver call nor while waiting for mutex_.
  std::mutex queue_mutex_;
  std::vector<ResourceEvent> queued_;
  std::atomic<bool> queued_any_{false};  // queued_ may be non-empty (set under queue_mutex_)
  std::unordered_map<CUgraphExec, RetiredGraph> published_;  // live exec graphs
  std::vector<RetiredGraph> retired_;                        // destroyed, not yet taken
  std::string epoch_;
  bool keep_retired_ = false;
  // Module and library unloads seen (bumped without the state lock): the reader drops its
  // cached kernel layouts when it moves.
  std::atomic<std::uint64_t> unloads_{0};
  CreatedNodes created_;  // GRAPHNODE_CREATED's notes, under a lock of their own
  // Mutable: a const query reads a captured graph on first demand (under mutex_).
  mutable GraphReader reader_;
  TensorMapTable tensor_maps_;
  mutable std::unordered_map<CUgraph, Captured> captured_;
  mutable std::unordered_map<CUgraph, std::vector<UnreadableNode>> captured_unreadable_;
  std::unordered_map<CUgraphExec, ExecState> execs_;
  // (exec, template) pairs from GRAPHEXEC_CREATED, read at the next instantiate EXIT on the
  // same thread (so an instantiate variant this handler does not intercept is still
  // caught); dropped when either handle is destroyed first.
  std::vector<PendingExec> pending_execs_;
  mutable GraphCaptureStats stats_;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_GRAPH_CAPTURE_H_
