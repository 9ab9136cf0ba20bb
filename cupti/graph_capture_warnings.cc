// GraphCapture: the kernel nodes recorded without their arguments, because they could not
// be read, as the report's warning lines (issue 18; docs/cupti.md, "Per node").
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cupti/graph_capture.h"

namespace graphcheck::cupti {
namespace {

// The report line of a kernel node whose arguments could not be read ("not checked: " is
// how the text report tells it from an overlap warning, docs/report-format.md).
std::string unreadable_line(std::string_view graph_kind, std::uint64_t graph,
                            const UnreadableNode& node) {
  return "not checked: " + std::string(graph_kind) + " " + std::to_string(graph) + " node " +
         std::to_string(node.id) + (node.kernel.empty() ? "" : " (kernel " + node.kernel + ")") +
         ": its arguments could not be read: " + node.cause;
}

}  // namespace

std::vector<std::string> GraphCapture::warning_lines(const ExecState& state) {
  std::vector<std::string> lines;
  for (const auto& [node_id, node] : state.unreadable) {
    lines.push_back(unreadable_line("graph", state.record->id, node));
  }
  for (const std::vector<std::uint32_t>& path : state.disabled) {
    if (const Node* node = locate_node(state.record->nodes, path)) {
      lines.push_back("note: graph " + std::to_string(state.record->id) + " node " +
                      std::to_string(node->id) +
                      (node->name.empty() ? "" : " (kernel " + node->name + ")") +
                      " is disabled (cuGraphNodeSetEnabled): not checked while disabled");
    }
  }
  return lines;
}

std::vector<std::string> GraphCapture::exec_warnings(std::uint64_t id) const {
  std::vector<std::string> lines;
  const StateLock lock(*this);
  for (const auto& [exec, state] : execs_) {
    if (state.record->id == id) {
      std::vector<std::string> more = warning_lines(state);
      lines.insert(lines.end(), more.begin(), more.end());
    }
  }
  return lines;
}

void GraphCapture::publish_locked(CUgraphExec exec, ExecState& state) {
  if (state.disabled.empty()) {
    state.checked = state.record;
  } else {
    auto checked = std::make_shared<GraphRecord>(*state.record);
    for (const std::vector<std::uint32_t>& path : state.disabled) {
      if (Node* node = locate_node(checked->nodes, path)) {
        node->params.clear();  // a disabled node runs nothing: it reads and writes nothing
        node->operands.clear();
      }
    }
    state.checked = std::move(checked);
  }
  RetiredGraph published{exec, state.checked, warning_lines(state)};
  const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
  published_[exec] = std::move(published);
}

std::vector<RetiredGraph> GraphCapture::take_retired() {
  const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
  return std::exchange(retired_, {});
}

std::vector<std::string> GraphCapture::warnings() const {
  std::vector<std::pair<std::uint64_t, std::string>> captured;
  std::vector<std::pair<std::uint64_t, std::string>> execs;
  {
    const StateLock lock(*this);
    read_captured_locked();
    for (const auto& [graph, nodes] : captured_unreadable_) {
      const auto record = captured_.find(graph);
      const std::uint64_t id = record != captured_.end() ? record->second.id : 0;
      for (const UnreadableNode& node : nodes) {
        captured.emplace_back(id, unreadable_line("captured graph", id, node));
      }
    }
    for (const auto& [exec, state] : execs_) {
      for (std::string& line : warning_lines(state)) {
        execs.emplace_back(state.record->id, std::move(line));
      }
    }
  }
  std::stable_sort(captured.begin(), captured.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::stable_sort(execs.begin(), execs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> lines;
  lines.reserve(captured.size() + execs.size());
  for (auto& [id, line] : captured) {
    lines.push_back(std::move(line));
  }
  for (auto& [id, line] : execs) {
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace graphcheck::cupti
