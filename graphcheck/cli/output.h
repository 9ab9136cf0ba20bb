// Where a command's report goes: standard output, or the file of `--output`. Shared by the
// commands that print a report (`check`, `report`) so that both fail the same way.
#ifndef GRAPHCHECK_CLI_OUTPUT_H_
#define GRAPHCHECK_CLI_OUTPUT_H_

#include <functional>
#include <ostream>
#include <string>

namespace graphcheck::cli {

/// Writes `text` to standard output when `path` is empty, else to the file `path` (created
/// or truncated; standard output stays empty).
/// @throws Error naming `--output PATH` and the system's reason when the file cannot be
/// opened or written, or when standard output fails.
void write_output(const std::string& text, const std::string& path);

/// As above, for a report written as it is made (`write(stream)` streams into standard
/// output or the file): the report is never held in memory whole.
/// @throws Error as above, and what `write` throws.
void write_output(const std::function<void(std::ostream&)>& write, const std::string& path);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_OUTPUT_H_
