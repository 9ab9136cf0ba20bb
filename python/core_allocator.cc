// graphcheck._core's reading of PyTorch's caching allocator (the dicts of
// `torch.cuda.memory_snapshot()`) into epoch allocations: the watch's `GraphPools` at every
// epoch of a CUDA graph (python/graphcheck/_watch/graph_pools.py). In C++ because a server's
// allocator holds thousands of blocks and the watch reads them at every capture: Python
// spent about 3.5 µs per block (issue 32 §2). The rule is graphcheck/detail/allocator_memory.h.
#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "graphcheck/detail/allocator_memory.h"
#include "python/core_bindings.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

// The keys read, interned once (a dict lookup with them reuses their hash); kept for the
// process's life, as the interpreter keeps interned strings.
PyObject* key(const char* text) {
  PyObject* interned = PyUnicode_InternFromString(text);
  if (interned == nullptr) {
    throw py::error_already_set();
  }
  return interned;
}

struct Keys {
  PyObject* address = key("address");
  PyObject* total_size = key("total_size");
  PyObject* size = key("size");
  PyObject* state = key("state");
  PyObject* blocks = key("blocks");
  PyObject* device = key("device");
  PyObject* segment_pool_id = key("segment_pool_id");
};

const Keys& keys() {
  static const Keys* const made = new Keys();  // NOLINT: leaked on purpose (see key())
  return *made;
}

// `mapping[key]`, or an empty handle where the key is missing (`mapping.get(key)`).
py::object lookup(py::handle mapping, PyObject* key) {
  if (PyDict_Check(mapping.ptr())) {
    PyObject* found = PyDict_GetItemWithError(mapping.ptr(), key);  // borrowed
    if (found == nullptr && PyErr_Occurred() != nullptr) {
      throw py::error_already_set();
    }
    return found == nullptr ? py::object() : py::reinterpret_borrow<py::object>(found);
  }
  PyObject* found = PyObject_GetItem(mapping.ptr(), key);
  if (found == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
      throw py::error_already_set();
    }
    PyErr_Clear();
    return py::object();
  }
  return py::reinterpret_steal<py::object>(found);
}

// Where a value was read, spelled only for an error message.
struct Where {
  const char* list = "allocator segment";  // "labels": spelled labels[<item>]
  std::size_t item = 0;
  std::ptrdiff_t block = -1;
  const char* key = "";
  [[nodiscard]] std::string text() const {
    const bool labels = std::string_view(list) == "labels";
    std::string out = labels ? "labels[" + std::to_string(item) + "]"
                             : std::string(list) + " " + std::to_string(item);
    if (block >= 0) {
      out += " block " + std::to_string(block);
    }
    return out + " '" + key + "'";
  }
};

// `int(value)` as an address or size: 0 for 0 (the caller skips it), a ValueError naming where
// it was read below 0 or beyond 64 bits (no allocator reports either: a segment dropped for one
// would hide its blocks without a word).
std::uint64_t unsigned_of(py::handle value, const Where& where) {
  py::object number = py::reinterpret_borrow<py::object>(value);
  if (!PyLong_CheckExact(value.ptr())) {
    try {
      number = py::int_(number);  // int(value)
    } catch (const py::error_already_set& error) {
      const std::string found = std::string(py::repr(value));
      if (error.matches(PyExc_TypeError)) {
        throw py::type_error(where.text() + ": expected an int, found " + found);
      }
      throw py::value_error(where.text() + ": expected an int, found " + found);
    }
  }
  int overflow = 0;
  const long long small = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow == 0) {
    if (small == -1 && PyErr_Occurred() != nullptr) {
      throw py::error_already_set();
    }
    if (small >= 0) {
      return static_cast<std::uint64_t>(small);
    }
  }
  if (overflow < 0 || (overflow == 0 && small < 0)) {
    throw py::value_error(where.text() + ": expected an address or size at or above 0, found " +
                          std::string(py::repr(value)));
  }
  const unsigned long long large = PyLong_AsUnsignedLongLong(number.ptr());
  if (PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    throw py::value_error(where.text() + ": expected an address or size below 2**64, found " +
                          std::string(py::repr(value)));
  }
  return large;
}

// `segment_pool_id` as the Python rule reads it: two ints, else the default pool {0,0}.
TorchPoolId pool_of(py::handle segment) {
  const py::object pool = lookup(segment, keys().segment_pool_id);
  if (!pool) {
    return {0, 0};
  }
  try {
    const py::tuple parts(py::reinterpret_borrow<py::iterable>(pool));
    if (parts.size() != 2) {
      return {0, 0};
    }
    const py::int_ first(parts[0]);
    const py::int_ second(parts[1]);
    return {first.cast<std::int64_t>(), second.cast<std::int64_t>()};
  } catch (const py::error_already_set& error) {
    if (error.matches(PyExc_TypeError) || error.matches(PyExc_ValueError) ||
        error.matches(PyExc_OverflowError)) {
      return {0, 0};
    }
    throw;
  } catch (const py::cast_error&) {
    return {0, 0};
  }
}

bool is_live(py::handle block) {
  const py::object state = lookup(block, keys().state);
  return state && PyUnicode_Check(state.ptr()) &&
         (PyUnicode_CompareWithASCIIString(state.ptr(), "active_allocated") == 0 ||
          PyUnicode_CompareWithASCIIString(state.ptr(), "active_pending_free") == 0);
}

std::vector<TorchPoolId> pools_of(const py::iterable& pools) {
  std::vector<TorchPoolId> out;
  for (py::handle pool : pools) {
    try {
      const auto pair = pool.cast<std::pair<std::int64_t, std::int64_t>>();
      out.emplace_back(pair.first, pair.second);
    } catch (const py::cast_error&) {
      throw py::type_error("graph_pools[" + std::to_string(out.size()) +
                           "]: expected a pool id (two ints below 2**63, as torch's "
                           "segment_pool_id), found " +
                           std::string(py::repr(pool)));
    }
  }
  return out;
}

std::vector<AllocatorSegment> segments_of(const py::iterable& segments,
                                          const py::iterable& graph_pools) {
  const std::vector<TorchPoolId> listed = pools_of(graph_pools);
  const Keys& k = keys();
  std::vector<AllocatorSegment> out;
  Where where;
  std::size_t index = 0;
  for (py::handle segment : segments) {
    where.item = index++;
    where.block = -1;
    AllocatorSegment parsed;
    const py::object address = lookup(segment, k.address);
    const py::object size = lookup(segment, k.total_size);
    where.key = "address";
    parsed.begin = address ? unsigned_of(address, where) : 0;
    where.key = "total_size";
    parsed.size = size ? unsigned_of(size, where) : 0;
    if (parsed.begin == 0 || parsed.size == 0) {
      continue;
    }
    parsed.pool = pool_of(segment);
    parsed.listed = std::find(listed.begin(), listed.end(), parsed.pool) != listed.end();
    const py::object device = lookup(segment, k.device);
    parsed.device = device ? std::string(py::str(device)) : "?";
    const py::object blocks = lookup(segment, k.blocks);
    if (!is_graph_pool(parsed.pool, parsed.listed) && blocks) {
      // A block without an address starts where the one before it ended.
      Address at = parsed.begin;
      for (py::handle block : py::reinterpret_borrow<py::iterable>(blocks)) {
        ++where.block;
        const py::object block_size = lookup(block, k.size);
        const py::object block_address = lookup(block, k.address);
        where.key = "size";
        const std::uint64_t bytes = block_size ? unsigned_of(block_size, where) : 0;
        where.key = "address";
        const Address begin = block_address ? unsigned_of(block_address, where) : at;
        if (bytes > 0 && is_live(block)) {
          parsed.live.emplace_back(begin, bytes);
        }
        at = begin + bytes;
      }
    }
    out.push_back(std::move(parsed));
  }
  return out;
}

// A label's text as UTF-8; code points that are not (a lone surrogate from a name that was not
// UTF-8) become backslash escapes, as the census names them (text_name).
std::string utf8_of(py::handle text) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (utf8 != nullptr) {
    return {utf8, static_cast<std::size_t>(size)};
  }
  PyErr_Clear();
  const py::bytes escaped = py::reinterpret_steal<py::bytes>(
      PyUnicode_AsEncodedString(text.ptr(), "utf-8", "backslashreplace"));
  if (!escaped) {
    throw py::error_already_set();
  }
  return std::string(escaped);
}

std::vector<LabelRange> labels_of(const py::iterable& labels) {
  std::vector<LabelRange> out;
  Where where{.list = "labels"};
  for (py::handle label : labels) {
    if (!PyTuple_Check(label.ptr()) || PyTuple_Size(label.ptr()) != 3 ||
        !PyUnicode_Check(PyTuple_GetItem(label.ptr(), 2))) {
      throw py::type_error("labels[" + std::to_string(where.item) +
                           "]: expected a (begin, end, label) tuple, found " +
                           std::string(py::repr(label)));
    }
    const auto parts = py::reinterpret_borrow<py::tuple>(label);
    where.key = "begin";
    const Address begin = unsigned_of(parts[0], where);
    where.key = "end";
    const Address end = unsigned_of(parts[1], where);
    out.push_back({begin, end, utf8_of(parts[2])});
    ++where.item;
  }
  return out;
}

}  // namespace

void bind_allocator(py::module_& module) {
  module.def("is_graph_pool", &is_graph_pool, py::arg("pool"), py::arg("listed"),
             "Whether the caching-allocator pool id `pool` is a graph's: a private pool (a, 0), "
             "a != 0, or any other but the default (0, 0) that a graph was seen using (`listed`).");
  module.def("torch_pool_name", &torch_pool_name, py::arg("pool"), py::arg("listed"),
             "'default' for (0, 0), 'graph:<a>,<b>' for a graph pool (is_graph_pool), else "
             "'mempool:<a>,<b>'.");
  module.def(
      "allocator_allocations",
      [](const py::iterable& segments, const py::iterable& graph_pools) {
        return allocator_allocations(segments_of(segments, graph_pools));
      },
      py::arg("segments"), py::arg("graph_pools"),
      "The caching allocator's segments (the dicts of torch.cuda.memory_snapshot()) as "
      "allocations in address order: a graph pool's segment alone, any other segment's live "
      "blocks (unlabelled) then the segment ('torch segment dev<d>'). graph_pools: the pool ids "
      "a graph was seen using. An address or size that is not an int in [0, 2**64) raises "
      "ValueError or TypeError naming its segment, block and key.");
  module.def(
      "add_allocator_memory",
      [](Epoch& epoch, const py::iterable& segments, const py::iterable& graph_pools,
         const py::iterable& labels) {
        const std::vector<AllocatorSegment> parsed = segments_of(segments, graph_pools);
        if (parsed.empty()) {
          return;  // nothing to add: the labels are not read (the CPU twin, every capture)
        }
        add_allocator_memory(epoch.allocations, parsed, labels_of(labels));
      },
      py::arg("epoch"), py::arg("segments"), py::arg("graph_pools"), py::arg("labels"),
      "Adds the caching allocator's segments and live blocks to epoch.allocations in place "
      "(graphcheck/detail/allocator_memory.h): an allocation of the epoch inside a graph pool's "
      "segment takes its pool; an entry whose range the epoch has, or a block where an "
      "allocation of the epoch begins, is left out; each added block takes the first of labels "
      "((begin, end, label)) over it; with no segments, nothing is read but the segments.");
}

}  // namespace graphcheck::detail
