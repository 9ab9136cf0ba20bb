// The message of the graphcheck::Error a call throws: tests compare whole messages, since a
// message that names the cause and the fix is part of the contract.
#ifndef GRAPHCHECK_TESTS_COMMON_THROWN_MESSAGE_H_
#define GRAPHCHECK_TESTS_COMMON_THROWN_MESSAGE_H_

#include <graphcheck/error.h>

#include <string>

namespace graphcheck::test_support {

/// What `fn()` throws as a graphcheck::Error, or "<no graphcheck::Error thrown>". Other
/// exceptions propagate (the test fails with them).
template <typename Fn>
std::string thrown_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  return "<no graphcheck::Error thrown>";
}

}  // namespace graphcheck::test_support

#endif  // GRAPHCHECK_TESTS_COMMON_THROWN_MESSAGE_H_
