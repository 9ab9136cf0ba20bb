// graphcheck._torch: the weights arena for Python models. Allocations made while loading are
// labelled with the Python frame that made them (`file:line in function`).
#include <Python.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <frameobject.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "python/torch_bindings.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

bool is_internal(const SiteTable& table, std::string_view file) {
  for (const std::string& prefix : table.internal_prefixes) {
    if (file.starts_with(prefix)) {
      return true;
    }
  }
  // Frozen importlib and other synthetic code objects ("<string>" is user code: kept).
  return file.starts_with("<frozen ");
}

// The innermost Python frame of this thread outside torch and graphcheck, as
// "file:line in qualname", or "" when the thread runs no Python or no frame qualifies. Torch
// releases the GIL around its ops, so the allocating thread takes it back for the moment; its
// frames cannot change meanwhile (the thread is here). Threads without a Python thread state
// (torch's worker pools) are skipped: they have no Python frame.
std::string python_site(const SiteTable& table) {
  if (Py_IsInitialized() == 0 || PyGILState_GetThisThreadState() == nullptr) {
    return {};
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* error_type = nullptr;
  PyObject* error_value = nullptr;
  PyObject* error_traceback = nullptr;
  PyErr_Fetch(&error_type, &error_value, &error_traceback);
  std::string site;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (file != nullptr && !is_internal(table, file)) {
#if PY_VERSION_HEX >= 0x030B0000
      const char* function = PyUnicode_AsUTF8(code->co_qualname);
#else
      const char* function = PyUnicode_AsUTF8(code->co_name);
#endif
      site = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(frame)) + " in " +
             (function != nullptr ? function : "?");
      Py_DECREF(code);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  PyErr_Restore(error_type, error_value, error_traceback);
  PyGILState_Release(gil);
  return site;
}

// One allocation through the site allocator: the arena's own DataPtr (freed with it) and
// where to forget the site.
struct SiteContext {
  c10::DataPtr inner;
  std::shared_ptr<SiteTable> table;
  Address begin = 0;
};

void free_site(void* context) {
  const std::unique_ptr<SiteContext> allocation(static_cast<SiteContext*>(context));
  allocation->table->erase(allocation->begin);
}  // `inner` returns the block to the arena here

// The arena's allocator with the Python site recorded beside each allocation.
class SiteAllocator final : public c10::Allocator {
 public:
  SiteAllocator(c10::Allocator* inner, std::shared_ptr<SiteTable> table)
      : inner_(inner), table_(std::move(table)) {}

  c10::DataPtr allocate(std::size_t n) override {
    // The site first, with no lock held: reading it may run Python (a garbage collection)
    // that allocates again.
    std::string site = n == 0 ? std::string() : python_site(*table_);
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) {
      return inner;
    }
    const auto begin = reinterpret_cast<Address>(data);
    auto context = std::make_unique<SiteContext>(SiteContext{std::move(inner), table_, begin});
    if (!site.empty()) {
      table_->insert(begin, std::move(site));
    }
    return {data, context.release(), &free_site, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
  std::shared_ptr<SiteTable> table_;
};

}  // namespace

void SiteTable::insert(Address begin, std::string site) {
  const std::lock_guard lock(mutex);
  sites.insert_or_assign(begin, std::move(site));
}

void SiteTable::erase(Address begin) {
  const std::lock_guard lock(mutex);
  sites.erase(begin);
}

std::string SiteTable::find(Address begin) {
  const std::lock_guard lock(mutex);
  const auto it = sites.find(begin);
  return it == sites.end() ? std::string() : it->second;
}

PyArena::PyArena(std::size_t capacity, std::string pool, std::vector<std::string> internal_prefixes)
    : arena_(capacity, std::move(pool)), sites_(std::make_shared<SiteTable>()) {
  sites_->internal_prefixes = std::move(internal_prefixes);
  allocator_ = std::make_unique<SiteAllocator>(arena_.allocator(), sites_);
}

PyArena::~PyArena() {
  while (!scopes_.empty()) {
    scopes_.pop_back();
  }
}

void PyArena::enter_loading() {
  // The arena's own scope checks that it is awake and counts the open scope (sleep refuses
  // while one is open); the site allocator then replaces the arena's allocator it installed.
  auto scope = std::make_unique<libtorch::WeightsArena::LoadScope>(arena_);
  c10::SetAllocator(c10::DeviceType::CPU, allocator_.get());
  if (c10::GetAllocator(c10::DeviceType::CPU) != allocator_.get()) {
    throw Error(
        "WeightsArena.loading: torch kept its CPU allocator (one was registered with a "
        "priority above 0); the arena cannot be installed in this process");
  }
  scopes_.push_back(std::move(scope));
}

void PyArena::exit_loading() {
  if (scopes_.empty()) {
    throw Error("WeightsArena.loading: no loading scope of this arena is open");
  }
  scopes_.pop_back();  // restores the allocator that was current when the scope opened
}

std::vector<Allocation> PyArena::allocations() const {
  std::vector<Allocation> allocations = arena_.allocations();
  for (Allocation& allocation : allocations) {
    std::string site = sites_->find(allocation.begin);
    if (!site.empty()) {
      allocation.label = std::move(site);
    }
  }
  return allocations;
}

void PyArena::label_allocations(Epoch& epoch) const {
  for (Allocation& allocation : epoch.allocations) {
    if (!arena_.contains(allocation.begin)) {
      continue;
    }
    std::string site = sites_->find(allocation.begin);
    if (!site.empty()) {
      allocation.label = std::move(site);
    }
  }
}

void bind_arena(py::module_& module) {
  py::class_<PyArena, std::shared_ptr<PyArena>> arena(
      module, "WeightsArena",
      "The CPU weights arena (graphcheck::libtorch::WeightsArena) with Python allocation "
      "sites. Use graphcheck.WeightsArena, which wraps it.");
  arena.def(py::init<std::size_t, std::string, std::vector<std::string>>(), py::arg("capacity"),
            py::arg("pool"), py::arg("internal_prefixes"));
  arena.def("enter_loading", &PyArena::enter_loading);
  arena.def("exit_loading", &PyArena::exit_loading);
  arena.def_property_readonly("open_scopes", &PyArena::open_scopes);
  arena.def(
      "sleep",
      [](PyArena& self, int level, const std::vector<std::pair<std::string, at::Tensor>>& buffers) {
        if (level != 1 && level != 2) {
          throw py::value_error("WeightsArena.sleep: level must be 1 or 2, got " +
                                std::to_string(level));
        }
        libtorch::Registry registry;
        registry.add_named(buffers, OwnerKind::kBuffer);
        self.arena().sleep(
            level == 1 ? libtorch::SleepLevel::kLevel1 : libtorch::SleepLevel::kLevel2, registry);
      },
      py::arg("level"), py::arg("buffers"));
  arena.def("wake_up", [](PyArena& self) { self.arena().wake_up(); });
  arena.def("allocations", &PyArena::allocations);
  arena.def(
      "contains",
      [](const PyArena& self, Address address) { return self.arena().contains(address); },
      py::arg("address"));
  arena.def_property_readonly("asleep", [](const PyArena& self) { return self.arena().asleep(); });
  arena.def_property_readonly("begin", [](const PyArena& self) { return self.arena().begin(); });
  arena.def_property_readonly("capacity",
                              [](const PyArena& self) { return self.arena().capacity(); });
  arena.def_property_readonly("used", [](const PyArena& self) { return self.arena().used(); });

  module.def(
      "cpu_allocator",
      [] { return reinterpret_cast<std::uintptr_t>(c10::GetAllocator(c10::DeviceType::CPU)); },
      "The address of torch's current CPU allocator (to tell that a scope restored it).");
}

}  // namespace graphcheck::detail
