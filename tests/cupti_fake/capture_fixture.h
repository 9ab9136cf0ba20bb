// Shared fixture of the graph-capture tests: a fake driver, a GraphCapture behind a
// Dispatcher, and helpers that send the callbacks CUPTI would send.
#ifndef GRAPHCHECK_TESTS_CUPTI_FAKE_CAPTURE_FIXTURE_H_
#define GRAPHCHECK_TESTS_CUPTI_FAKE_CAPTURE_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cupti/dispatcher.h"
#include "cupti/graph_capture.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck {
// Readable gtest output for the core's value types.
inline void PrintTo(const Operand& operand, std::ostream* out) {
  *out << "{" << operand.role << ", 0x" << std::hex << operand.begin << std::dec << ", "
       << operand.size << ", access " << static_cast<int>(operand.access) << "}";
}
inline void PrintTo(const KernelParam& param, std::ostream* out) {
  *out << "{offset " << param.offset << ", " << param.bytes.size() << " bytes}";
}
}  // namespace graphcheck

namespace graphcheck::cupti::testing {

/// The bytes of `value` as a KernelParam would hold them.
template <typename T>
std::vector<std::uint8_t> bytes_of(const T& value) {
  std::vector<std::uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

class CaptureTest : public ::testing::Test {
 protected:
  CaptureTest() : capture_(api_) { dispatcher_.add_handler(capture_); }

  // An API callback at EXIT returning `result` (0 = success).
  void api_exit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params,
                int result = 0) {
    int value = result;
    const CUpti_CallbackData data = api_data(params, CUPTI_API_EXIT, &value);
    dispatcher_.on_callback(domain, cbid, &data);
  }
  void api_enter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params) {
    const CUpti_CallbackData data = api_data(params, CUPTI_API_ENTER, nullptr);
    dispatcher_.on_callback(domain, cbid, &data);
  }
  void resource(CUpti_CallbackId cbid, CUpti_GraphData graph) {
    const CUpti_ResourceData data = resource_data(&graph);
    dispatcher_.on_callback(CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
  }
  // cuStreamEndCapture returning `graph`.
  void end_capture(CUgraph graph) {
    cuStreamEndCapture_params params{nullptr, &graph};
    api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &params);
  }
  // What CUPTI sends for cuGraphInstantiateWithFlags: GRAPHEXEC_CREATED inside, then EXIT.
  void instantiate(CUgraphExec exec, CUgraph graph) {
    CUpti_GraphData created{};
    created.graph = graph;
    created.graphExec = exec;
    resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, created);
    cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
    api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
             &params);
  }
  // The error a callback left behind ("" if none).
  std::string callback_error() { return dispatcher_.take_error().message(); }

  FakeNode kernel_node(std::uint64_t id, CUfunction func, void** args) {
    FakeNode node;
    node.type = CU_GRAPH_NODE_TYPE_KERNEL;
    node.id = id;
    node.kernel.func = func;
    node.kernel.kernelParams = args;
    return node;
  }

  FakeDriver api_;
  GraphCapture capture_;
  Dispatcher dispatcher_;
};

}  // namespace graphcheck::cupti::testing

#endif  // GRAPHCHECK_TESTS_CUPTI_FAKE_CAPTURE_FIXTURE_H_
