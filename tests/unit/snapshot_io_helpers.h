// Snapshot texts and the parse helper shared by the snapshot JSON tests (snapshot_io_test.cc:
// reading and writing; snapshot_io_errors_test.cc: errors and limits).
#ifndef GRAPHCHECK_TESTS_UNIT_SNAPSHOT_IO_HELPERS_H_
#define GRAPHCHECK_TESTS_UNIT_SNAPSHOT_IO_HELPERS_H_

#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>

#include <string>

namespace graphcheck::testing_helpers {

inline constexpr const char* kExample = R"({
  "format": "graphcheck-snapshot", "version": 1,
  "producer": {"backend": "cupti", "tool": "graphcheck 0.1.0"},
  "epochs": [
    {"label": "capture",
     "spans": [
       {"begin": "0x7f3a00000000", "size": 1048576, "kind": "parameter", "name": "layers.0.mlp.weight"},
       {"begin": "0x7F3A00200000", "size": 65536, "kind": "runtime", "name": "kv_cache.0", "reason": "KV cache"}],
     "allocations": [
       {"begin": "0x7f3a00000000", "size": 2097152, "pool": "default", "generation": 1},
       {"begin": "0x7f3a00300000", "size": 512, "pool": "default", "generation": 7,
        "label": "layers.0.quant_method.workspace"}]},
    {"label": "after_wake", "spans": [], "allocations": []}],
  "graphs": [
    {"id": 1, "epoch": "capture",
     "nodes": [
       {"id": 0, "type": "kernel", "name": "gemm_kernel",
        "params": [{"offset": 0, "size": 8, "hex": "000000003a7F0000"}, {"offset": 8, "size": 4, "hex": "01020304"}]},
       {"id": 1, "type": "memcpy", "src": "0x10", "dst": "0x20", "size": 1024}]}],
  "allow": ["layers.*.quant_method.workspace"]
})";

// A snapshot with one epoch "capture" and one graph whose nodes are `nodes` (JSON text).
inline std::string with_nodes(const std::string& nodes) {
  return R"({"format": "graphcheck-snapshot", "version": 1,
  "epochs": [{"label": "capture", "spans": [], "allocations": []}],
  "graphs": [{"id": 3, "epoch": "capture", "nodes": [)" +
         nodes + "]}]}";
}

// A snapshot whose only epoch is `epoch` (JSON text) and that has no graphs.
inline std::string with_epoch(const std::string& epoch) {
  return R"({"format": "graphcheck-snapshot", "version": 1, "epochs": [)" + epoch +
         R"(], "graphs": []})";
}

// The message parse_snapshot throws for `json`, or "<parsed>" when it parses.
inline std::string error_of(const std::string& json) {
  try {
    (void)parse_snapshot(json, "t.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "<parsed>";
}

}  // namespace graphcheck::testing_helpers

#endif  // GRAPHCHECK_TESTS_UNIT_SNAPSHOT_IO_HELPERS_H_
