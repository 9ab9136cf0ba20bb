// The one exception type graphcheck throws for misuse and setup failures.
#ifndef GRAPHCHECK_ERROR_H_
#define GRAPHCHECK_ERROR_H_

#include <stdexcept>
#include <string>

namespace graphcheck {

/// @brief Misuse, bad input or a setup failure. The message names the cause and the fix
/// (for input: the field, its JSON path, what was expected and what was found).
///
/// Findings about a graph are never errors: they are data in a `Report`.
/// Thread safety: an `Error` is an immutable value; copies may be used from any thread.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_ERROR_H_
