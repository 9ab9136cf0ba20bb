// Messages of the checked-call macros (GRAPHCHECK_CU_CHECK and friends). Out of line so the
// macros stay small at every call site.
#include <graphcheck/error.h>

#include <cctype>
#include <string>
#include <string_view>

#include "cupti/driver_api.h"

namespace graphcheck::cupti::detail {
namespace {

// The last two components of `file` ("cupti/graph_reader.cc"), enough to find the line
// without printing the build machine's absolute paths.
std::string_view short_file(const char* file) {
  const std::string_view path(file == nullptr ? "" : file);
  const std::size_t last = path.rfind('/');
  if (last == std::string_view::npos || last == 0) {
    return path;
  }
  const std::size_t before = path.rfind('/', last - 1);
  return before == std::string_view::npos ? path : path.substr(before + 1);
}

std::string location(std::string_view call_text, const char* file, int line) {
  std::string out = " [";
  out += call_text;
  out += " at ";
  out += short_file(file);
  out += ':';
  out += std::to_string(line);
  out += ']';
  return out;
}

}  // namespace

std::string c_api_name(std::string_view call_text) {
  const std::size_t paren = call_text.find('(');
  std::string_view method = call_text.substr(0, paren);
  // "api_.cu_x" or "api->cu_x" written as the call: keep the method name only.
  const std::size_t dot = method.find_last_of(".>");
  if (dot != std::string_view::npos) {
    method = method.substr(dot + 1);
  }
  while (!method.empty() && std::isspace(static_cast<unsigned char>(method.back())) != 0) {
    method.remove_suffix(1);
  }
  // cu_graph_get_nodes -> cuGraphGetNodes; a trailing "_v2" version suffix stays as is.
  std::string name;
  bool upper = false;
  for (std::size_t i = 0; i < method.size(); ++i) {
    const char c = method[i];
    if (c == '_') {
      const bool version = i + 1 < method.size() && method[i + 1] == 'v' && i + 2 < method.size() &&
                           std::isdigit(static_cast<unsigned char>(method[i + 2])) != 0;
      if (version) {
        name += '_';
      } else {
        upper = !name.empty();
      }
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

std::string format_cu_error(DriverApi& api, CUresult status, std::string_view call_text,
                            const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cu_get_error_name(status, &name) != CUDA_SUCCESS || name == nullptr) {
    name = nullptr;
  }
  if (api.cu_get_error_string(status, &text) != CUDA_SUCCESS || text == nullptr) {
    text = nullptr;
  }
  std::string message = c_api_name(call_text) + " failed with ";
  message += name != nullptr ? std::string(name) : "CUresult " + std::to_string(status);
  if (text != nullptr) {
    message += " (";
    message += text;
    message += ')';
  }
  return message + location(call_text, file, line);
}

std::string format_cupti_error(DriverApi& api, CUptiResult status, std::string_view call_text,
                               const char* file, int line) {
  const char* name = nullptr;
  if (api.cupti_get_result_string(status, &name) != CUPTI_SUCCESS || name == nullptr) {
    name = nullptr;
  }
  std::string message = c_api_name(call_text) + " failed with ";
  message += name != nullptr ? std::string(name) : "CUptiResult " + std::to_string(status);
  return message + location(call_text, file, line);
}

void throw_cu_error(DriverApi& api, CUresult status, const char* call_text, const char* file,
                    int line) {
  throw Error(format_cu_error(api, status, call_text, file, line));
}

void throw_cupti_error(DriverApi& api, CUptiResult status, const char* call_text, const char* file,
                       int line) {
  throw Error(format_cupti_error(api, status, call_text, file, line));
}

Status cu_status(DriverApi& api, CUresult status, const char* call_text, const char* file,
                 int line) {
  if (status == CUDA_SUCCESS) {
    return {};
  }
  return Status::error(format_cu_error(api, status, call_text, file, line));
}

Status cupti_status(DriverApi& api, CUptiResult status, const char* call_text, const char* file,
                    int line) {
  if (status == CUPTI_SUCCESS) {
    return {};
  }
  return Status::error(format_cupti_error(api, status, call_text, file, line));
}

}  // namespace graphcheck::cupti::detail
