#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <graphcheck/torch/detail/allocation_site.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace graphcheck::libtorch::detail {
namespace {

constexpr std::string_view kAnonymous = "(anonymous namespace)";
constexpr std::string_view kOperator = "operator";

// Shared objects whose frames are allocation machinery, never an allocation site.
constexpr std::array<std::string_view, 9> kInternalLibraries = {
    "libtorch", "libc10",  "libc.so", "libc-",   "libstdc++",
    "libgcc_s", "libgomp", "libm.so", "ld-linux"};

// Function-name prefixes of allocation machinery: torch's namespaces (also for header code
// instantiated in the caller's binary), the standard library and this adapter's allocator.
constexpr std::array<std::string_view, 9> kInternalPrefixes = {
    "c10::",
    "at::",
    "torch::",
    "caffe2::",
    "std::",
    "__gnu_cxx::",
    "__cxa",
    "graphcheck::libtorch::detail::",
    "graphcheck::libtorch::WeightsArena"};

bool is_internal_library(std::string_view path) {
  const auto slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (const std::string_view prefix : kInternalLibraries) {
    if (base.starts_with(prefix)) {
      return true;
    }
  }
  return false;
}

// Skips the punctuation of an operator name ("operator()", "operator<<") starting at `i`, the
// index just after "operator"; returns the index after it.
std::size_t skip_operator_token(std::string_view text, std::size_t i) {
  if (text.substr(i).starts_with("()")) {
    return i + 2;
  }
  if (text.substr(i).starts_with("[]")) {
    return i + 2;
  }
  constexpr std::string_view kPunctuation = "<>=!+-*/%&|^~,";
  while (i < text.size() && kPunctuation.find(text[i]) != std::string_view::npos) {
    ++i;
  }
  return i;
}

struct FrameInfo {
  std::string name;  // function_name() of the symbol; empty if unresolved
  bool internal = true;
};

FrameInfo symbolize(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0) {
    return {};
  }
  if (info.dli_fname != nullptr && is_internal_library(info.dli_fname)) {
    return {};
  }
  if (info.dli_sname == nullptr) {
    return {};
  }
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), &std::free);
  FrameInfo frame;
  frame.name = function_name(status == 0 && demangled ? std::string_view(demangled.get())
                                                      : std::string_view(info.dli_sname));
  frame.internal = frame.name.empty() || is_internal_frame(frame.name);
  return frame;
}

}  // namespace

CallStack capture_call_stack() {
  CallStack stack;
  stack.size = backtrace(stack.frames.data(), CallStack::kMaxFrames);
  return stack;
}

std::string function_name(std::string_view demangled) {
  int depth = 0;
  std::size_t name_begin = 0;
  std::size_t i = 0;
  while (i < demangled.size()) {
    const char c = demangled[i];
    if (demangled.substr(i).starts_with(kAnonymous)) {
      i += kAnonymous.size();
      continue;
    }
    if (demangled.substr(i).starts_with(kOperator) &&
        (i == 0 || demangled[i - 1] == ':' || demangled[i - 1] == ' ')) {
      i = skip_operator_token(demangled, i + kOperator.size());
      continue;
    }
    if (c == '(' && depth == 0) {
      break;  // the argument list
    }
    if (c == '<' || c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if (c == '>' || c == '}' || c == ']' || c == ')') {
      --depth;
    } else if (c == ' ' && depth == 0) {
      name_begin = i + 1;  // everything before is the return type
    }
    ++i;
  }
  return std::string(demangled.substr(name_begin, i - name_begin));
}

bool is_internal_frame(std::string_view name) {
  for (const std::string_view prefix : kInternalPrefixes) {
    if (name.starts_with(prefix)) {
      return true;
    }
  }
  return false;
}

std::string allocation_site(const CallStack& stack) {
  static std::mutex mutex;
  static std::unordered_map<void*, FrameInfo> cache;
  for (int i = 0; i < stack.size; ++i) {
    void* address = stack.frames[static_cast<std::size_t>(i)];
    const std::lock_guard lock(mutex);
    auto it = cache.find(address);
    if (it == cache.end()) {
      it = cache.emplace(address, symbolize(address)).first;
    }
    if (!it->second.internal) {
      return it->second.name;
    }
  }
  return "<unknown allocation site>";
}

}  // namespace graphcheck::libtorch::detail
