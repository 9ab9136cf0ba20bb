// graphcheck._torch.registered_fingerprint: which modules, parameters and buffers a model
// holds and where their data lives, read in C++. The watch asks it at every CUDA capture to
// know whether the cached registry still holds (graphcheck/_watch/registry.py); written in
// Python it walked the module tree with generators and cost more than the rest of a later
// capture's bookkeeping (issue 32). It reads the same dicts `named_modules()` and
// `named_parameters()` read, calls no Python code and changes nothing.
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "python/torch_bindings.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

// A tensor whose data address cannot be read (a wrapper subclass), and a value in a tensor
// dict that is no tensor: counted by identity only.
constexpr std::uint64_t kNoAddress = ~std::uint64_t{0};
constexpr std::uint64_t kNotATensor = ~std::uint64_t{1};

std::uint64_t address_of(const void* object) { return reinterpret_cast<std::uintptr_t>(object); }

// Where a tensor's data lives: its data address and its storage's size (a storage resized in
// place keeps its address and changes its span).
struct DataPlace {
  std::uint64_t address;
  std::uint64_t storage_bytes;
};

DataPlace data_place(PyObject* value) {
  if (!THPVariable_Check(value)) {
    return {kNotATensor, 0};
  }
  try {
    const at::Tensor& tensor = THPVariable_Unpack(value);
    if (!tensor.defined() || !tensor.has_storage()) {
      return {kNoAddress, 0};
    }
    // const_data_ptr never materializes a copy-on-write storage (data_ptr() would).
    return {address_of(tensor.const_data_ptr()), tensor.storage().nbytes()};
  } catch (const std::exception&) {
    return {kNoAddress, 0};
  }
}

// The instance attribute `name` of `module` (a dict). `name` is an interned str made once:
// PyObject_GetAttrString would make a new one per call.
py::dict module_dict(PyObject* module, const py::str& name) {
  PyObject* found = PyObject_GetAttr(module, name.ptr());
  if (found == nullptr) {
    throw py::error_already_set();
  }
  py::object owned = py::reinterpret_steal<py::object>(found);
  if (!PyDict_Check(found)) {
    throw py::type_error("registered_fingerprint: expected " + std::string(name) +
                         " of a torch.nn.Module to be a dict, found " + Py_TYPE(found)->tp_name +
                         " in a " + Py_TYPE(module)->tp_name);
  }
  return py::reinterpret_borrow<py::dict>(found);
}

// Per entry of a module's _parameters or _buffers: the name object's address and hash, the
// value's address, its data's address and its storage's size. A None entry (a declared, unset
// parameter) counts as nothing, as named_parameters() skips it.
void add_tensors(PyObject* module, const py::str& which, std::vector<std::uint64_t>& out) {
  const py::dict tensors = module_dict(module, which);
  Py_ssize_t position = 0;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  while (PyDict_Next(tensors.ptr(), &position, &key, &value) != 0) {
    if (value == Py_None) {
      continue;
    }
    // A str's hash is cached: no Python code runs. Address and hash together tell a name
    // object reused for another name apart.
    const Py_hash_t hash = PyObject_Hash(key);
    if (hash == -1) {
      PyErr_Clear();
    }
    out.push_back(address_of(key));
    out.push_back(static_cast<std::uint64_t>(hash));
    out.push_back(address_of(value));
    const DataPlace place = data_place(value);
    out.push_back(place.address);
    out.push_back(place.storage_bytes);
  }
}

struct Names {
  py::str modules = py::reinterpret_steal<py::str>(PyUnicode_InternFromString("_modules"));
  py::str parameters = py::reinterpret_steal<py::str>(PyUnicode_InternFromString("_parameters"));
  py::str buffers = py::reinterpret_steal<py::str>(PyUnicode_InternFromString("_buffers"));
};

py::bytes registered_fingerprint(const py::object& model) {
  // Made once, with the GIL, and never freed (the interpreter may be gone at exit).
  static const Names& names = *new Names();  // NOLINT(cppcoreguidelines-owning-memory)
  std::vector<std::uint64_t> out;
  // Strong references: a getattr may run Python code (a module class's own __getattribute__),
  // which must not free what the walk still reads. A module shared by two parents counts once.
  std::vector<py::object> visited;
  std::unordered_set<PyObject*> seen;
  std::vector<py::object> pending{model};
  while (!pending.empty()) {
    py::object owned = std::move(pending.back());
    pending.pop_back();
    PyObject* module = owned.ptr();
    if (!seen.insert(module).second) {
      continue;
    }
    visited.push_back(std::move(owned));
    out.push_back(address_of(module));
    add_tensors(module, names.parameters, out);
    add_tensors(module, names.buffers, out);
    const py::dict children = module_dict(module, names.modules);
    const std::size_t first = pending.size();
    Py_ssize_t position = 0;
    PyObject* key = nullptr;
    PyObject* child = nullptr;
    while (PyDict_Next(children.ptr(), &position, &key, &child) != 0) {
      if (child != Py_None) {
        pending.push_back(py::reinterpret_borrow<py::object>(child));
      }
    }
    // Children are visited in registration order (pre-order, as named_modules()).
    std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first), pending.end());
  }
  return {reinterpret_cast<const char*>(out.data()), out.size() * sizeof(std::uint64_t)};
}

}  // namespace

void bind_fingerprint(py::module_& module) {
  module.def("registered_fingerprint", &registered_fingerprint, py::arg("model"),
             "Which modules, parameters and buffers `model` holds and where their data lives, "
             "as bytes: equal bytes mean nothing was added, removed, rebound or given new "
             "data in between.");
}

}  // namespace graphcheck::detail
