// Kernel arguments of one 8-byte word holding an address, and a graph of one kernel reading
// them, as a graph record stores them: the fabricated graphs of the cupti-fake tests.
#ifndef GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_
#define GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_

#include <graphcheck/address.h>
#include <graphcheck/graph.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace graphcheck::test_support {

/// The parameter at `offset` whose bytes are `address`, little-endian.
inline KernelParam pointer_param(std::uint64_t offset, Address address) {
  KernelParam param;
  param.offset = offset;
  for (int byte = 0; byte < 8; ++byte) {
    param.bytes.push_back(static_cast<std::uint8_t>(address >> (8 * byte)));
  }
  return param;
}

/// Graph `id` of the capture epoch: one kernel node `name` whose arguments are `words`, one
/// 8-byte word each (offsets 0, 8, ...).
inline GraphRecord one_kernel_graph(std::uint64_t id, const std::string& name,
                                    const std::vector<Address>& words) {
  GraphRecord graph;
  graph.id = id;
  graph.epoch = "capture";
  Node node;
  node.type = NodeType::kKernel;
  node.name = name;
  for (std::size_t i = 0; i < words.size(); ++i) {
    node.params.push_back(pointer_param(8 * i, words[i]));
  }
  graph.nodes.push_back(node);
  return graph;
}

}  // namespace graphcheck::test_support

#endif  // GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_
