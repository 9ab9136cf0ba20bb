// Where a command's report goes: standard output, or the file of `--output`. Shared by the
// commands that print a report (`check`, `report`) so that both fail the same way.
#ifndef GRAPHCHECK_CLI_OUTPUT_H_
#define GRAPHCHECK_CLI_OUTPUT_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace graphcheck::cli {

/// A file the command read, which `--output` must not overwrite: its path and what it is
/// ("the snapshot being checked", "an allowlist file").
struct InputFile {
  std::string path;
  std::string what;
};

/// Writes `text` to standard output when `path` is empty, else to the file `path` (created
/// or truncated; standard output stays empty).
/// @throws Error naming `--output PATH` and the system's reason when the file cannot be
/// opened or written, or when standard output fails; naming the input when `path` is one of
/// `inputs` (the same file by any name: a link too), before anything is written.
void write_output(const std::string& text, const std::string& path,
                  const std::vector<InputFile>& inputs);

/// As above, for a report written as it is made (`write(stream)` streams into standard
/// output or the file): the report is never held in memory whole.
/// @throws Error as above, and what `write` throws.
void write_output(const std::function<void(std::ostream&)>& write, const std::string& path,
                  const std::vector<InputFile>& inputs);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_OUTPUT_H_
