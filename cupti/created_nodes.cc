#include "cupti/created_nodes.h"

#include <mutex>

namespace graphcheck::cupti {

NodeTypes::NodeTypes(const std::vector<CreatedNode>* notes, const std::vector<CUgraphNode>& handles)
    : notes_(notes) {
  if (notes_ == nullptr || notes_->empty()) {
    notes_ = nullptr;
    return;
  }
  // Positional when the notes are exactly the handles: every note was seen and no node was
  // destroyed (a destroyed node leaves its note behind, so the sizes differ).
  positional_ = notes_->size() == handles.size();
  for (std::size_t i = 0; positional_ && i < handles.size(); ++i) {
    positional_ = (*notes_)[i].node == handles[i];
  }
  if (!positional_) {
    by_handle_.reserve(notes_->size());
    for (const CreatedNode& note : *notes_) {
      by_handle_[note.node] = note.type;  // the latest note of a reused handle wins
    }
  }
}

std::optional<CUgraphNodeType> NodeTypes::type(std::size_t i, CUgraphNode handle) const {
  if (notes_ == nullptr) {
    return std::nullopt;
  }
  if (positional_) {
    return (*notes_)[i].type;
  }
  const auto found = by_handle_.find(handle);
  return found == by_handle_.end() ? std::nullopt : std::optional(found->second);
}

void CreatedNodes::note(CUgraph graph, CUgraphNode node, CUgraphNodeType type) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++created_;
  if (graph == nullptr || node == nullptr) {
    return;  // CUPTI did not say where: the read asks the driver
  }
  if (graph != last_graph_ || last_ == nullptr) {
    last_ = &by_graph_[graph];
    last_graph_ = graph;
  }
  if (last_->overflowed) {
    return;
  }
  if (last_->nodes.size() == kMaxNotes) {
    last_->nodes = {};  // freed: reads ask the driver
    last_->overflowed = true;
    return;
  }
  last_->nodes.push_back(CreatedNode{node, type});
}

void CreatedNodes::count_unnoted() {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++created_;
  ++unnoted_;
}

void CreatedNodes::forget(CUgraph graph) {
  const std::lock_guard<std::mutex> lock(mutex_);
  by_graph_.erase(graph);
  if (graph == last_graph_) {
    last_graph_ = nullptr;
    last_ = nullptr;
  }
}

NodeTypes CreatedNodes::of(CUgraph graph, const std::vector<CUgraphNode>& handles) const {
  const std::vector<CreatedNode>* notes = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = by_graph_.find(graph);
    if (found != by_graph_.end() && !found->second.overflowed) {
      notes = &found->second.nodes;
    }
  }
  // Read without the lock: only a note or forget of this graph changes its list (see the
  // class comment).
  return NodeTypes(notes, handles);
}

std::uint64_t CreatedNodes::created() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return created_;
}

std::uint64_t CreatedNodes::unnoted() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return unnoted_;
}

std::size_t CreatedNodes::size() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (const auto& [graph, notes] : by_graph_) {
    count += notes.nodes.size();
  }
  return count;
}

}  // namespace graphcheck::cupti
