// A kernel argument of one 8-byte word holding an address, as a graph record stores it: the
// fabricated graphs of the session and backend tests read it.
#ifndef GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_
#define GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_

#include <graphcheck/address.h>
#include <graphcheck/graph.h>

#include <cstdint>

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

}  // namespace graphcheck::test_support

#endif  // GRAPHCHECK_TESTS_COMMON_POINTER_PARAM_H_
