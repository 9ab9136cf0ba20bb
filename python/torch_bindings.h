// Shared declarations of graphcheck._torch's binding sources (python/torch_*.cc): the weights
// arena as Python sees it (allocation sites are Python frames) and the error translation.
//
// graphcheck._torch links the LibTorch adapter (graphcheck::torch) and torch's Python bindings
// (libtorch_python: at::Tensor converts to and from torch.Tensor). It imports graphcheck._core
// first, so the Snapshot, Epoch and Allocation values it returns are _core's classes. The
// Python API on top of it is graphcheck._capture, graphcheck.arena and graphcheck.testing.
#ifndef GRAPHCHECK_PYTHON_TORCH_BINDINGS_H_
#define GRAPHCHECK_PYTHON_TORCH_BINDINGS_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/torch/weights_arena.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace c10 {
struct Allocator;
}  // namespace c10

namespace graphcheck::detail {

/// The Python frame (`file:line in function`) that made each live arena allocation, keyed by
/// the allocation's first byte. Shared by the arena and its allocations (an allocation may
/// outlive the arena object). Thread safety: every member function locks `mutex`.
struct SiteTable {
  std::mutex mutex;
  std::unordered_map<Address, std::string> sites;
  /// Frames whose file starts with one of these are machinery (torch, graphcheck's own
  /// modules), not the allocating site: the first frame outside them is named. Set once at
  /// construction, read without the lock.
  std::vector<std::string> internal_prefixes;

  void insert(Address begin, std::string site);
  void erase(Address begin);
  /// The site of the allocation starting at `begin`, or "" if none was recorded.
  [[nodiscard]] std::string find(Address begin);
};

/// A `WeightsArena` for Python models: `enter_loading` installs an allocator that takes its
/// memory from the arena and records, for every allocation made on a thread that runs Python,
/// the innermost Python frame outside torch and graphcheck (read with the GIL, which the
/// allocating thread takes back for the moment: torch releases it around its ops). Other
/// threads' allocations keep the arena's C++ label.
///
/// Lifetime: shared (`std::shared_ptr`) by the Python object and every capture record that
/// names it. Thread safety: as `libtorch::WeightsArena`; loading scopes are process-wide and
/// must be exited in reverse order of entry.
class PyArena {
 public:
  PyArena(std::size_t capacity, std::string pool, std::vector<std::string> internal_prefixes);
  PyArena(const PyArena&) = delete;
  PyArena& operator=(const PyArena&) = delete;
  PyArena(PyArena&&) = delete;
  PyArena& operator=(PyArena&&) = delete;
  ~PyArena();

  /// Opens a loading scope: the arena (through the site-recording allocator) becomes torch's
  /// CPU allocator until the matching `exit_loading`.
  /// @throws graphcheck::Error if the arena is asleep or torch keeps its allocator.
  void enter_loading();
  /// Closes the innermost loading scope and restores the allocator it replaced.
  /// @throws graphcheck::Error if no scope is open.
  void exit_loading();
  [[nodiscard]] std::size_t open_scopes() const { return scopes_.size(); }

  [[nodiscard]] libtorch::WeightsArena& arena() { return arena_; }
  [[nodiscard]] const libtorch::WeightsArena& arena() const { return arena_; }

  /// The arena's live allocations, labelled with their Python site where one was recorded.
  [[nodiscard]] std::vector<Allocation> allocations() const;
  /// Replaces the label of every allocation of `epoch` that has a recorded Python site.
  void label_allocations(Epoch& epoch) const;

 private:
  libtorch::WeightsArena arena_;
  std::shared_ptr<SiteTable> sites_;
  std::unique_ptr<c10::Allocator> allocator_;
  std::vector<std::unique_ptr<libtorch::WeightsArena::LoadScope>> scopes_;
};

/// Binds WeightsArena (as `_torch.WeightsArena`) and `cpu_allocator()`
/// (python/torch_arena.cc).
void bind_arena(pybind11::module_& module);

/// Binds CaptureWindow and CaptureRecord (python/torch_capture.cc). Needs bind_arena first.
void bind_capture(pybind11::module_& module);
/// Binds `registered_fingerprint` (python/torch_fingerprint.cc).
void bind_fingerprint(pybind11::module_& module);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_PYTHON_TORCH_BINDINGS_H_
