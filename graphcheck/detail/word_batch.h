// Kernel argument words gathered in batches for the checker's lookups: a lookup of one word
// does not wait for the branch that decided whether the previous word was a reference, so
// the lookups of a batch overlap in the memory system (docs/verdicts.md, "Performance").
#ifndef GRAPHCHECK_DETAIL_WORD_BATCH_H_
#define GRAPHCHECK_DETAIL_WORD_BATCH_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/graph.h>
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace graphcheck::detail {

/// The words of kernel arguments that lie in a window (the capture's known memory and the
/// graph's ranges), in scan order. Only the words are stored; a word's node, argument and
/// offset are found again when asked (`locate`), which the checker does only for the few
/// words its fast path does not decide.
/// Thread safety: none. Lifetime: the nodes added must outlive the batch's contents.
class WordBatch {
 public:
  /// A batch is looked up once it holds this many words (after a node).
  static constexpr std::size_t kFlushAt = 512;
  /// At most this many words (below 4096: the checker's packed counters hold 12 bits).
  static constexpr std::size_t kCapacity = 4095;

  struct Location {
    const Node* node = nullptr;
    std::uint32_t param = 0;
    std::uint32_t offset = 0;
  };

  WordBatch()
      : words_(std::make_unique<Address[]>(kCapacity)),
        nodes_(std::make_unique<NodeEntry[]>(kNodeCapacity)) {}

  /// Keeps only the words that can be references: inside the capture's known memory, one
  /// past its top (an end pointer), or in the graph's ranges (the hull of those).
  void set_window(const AddressIndex& capture, const GraphRanges& ranges) {
    Address low = ~Address{0};
    Address high = 0;
    if (capture.cell_count() != 0) {
      low = capture.low();
      high = capture.high() == ~Address{0} ? capture.high() : capture.high() + 1;
    }
    if (!ranges.empty()) {
      low = std::min(low, ranges.low());
      high = std::max(high, ranges.high());
    }
    empty_ = low > high;
    low_ = low;
    span_ = high - low;
  }

  /// Appends `node`'s argument words that lie in the window. `flush(*this)` is called when
  /// the batch is full (mid-node if need be) and after the node once `kFlushAt` words are
  /// kept; it must look the words up and `clear()` the batch.
  template <typename Flush>
  void add(const Node& node, Flush&& flush) {
    if (empty_) {
      return;
    }
    if (node_count_ == kNodeCapacity) {
      flush(*this);
    }
    nodes_[node_count_++] = {&node, static_cast<std::uint32_t>(size_), 0, 0};
    const Address low = low_;
    const Address span = span_;
    Address* const out = words_.get();
    std::size_t n = size_;
    const KernelParam* const params = node.params.data();
    for (std::size_t p = 0, count = node.params.size(); p < count; ++p) {
      const std::uint8_t* const data = params[p].bytes.data();
      const std::size_t words = params[p].bytes.size() / 8;
      if (words > kCapacity - n) [[unlikely]] {
        size_ = n;
        add_in_parts(node, p, flush);
        n = size_;
        continue;
      }
      // Each word is written; only one in the window advances the end (no branch on it).
      for (std::size_t at = 0; at < words; ++at) {
        const Address word = load_le64(data + 8 * at);
        out[n] = word;
        n += word - low <= span ? 1 : 0;
      }
    }
    size_ = n;
    if (size_ >= kFlushAt) {
      flush(*this);
    }
  }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const Address* words() const { return words_.get(); }

  /// Where word `i` came from. Calls between two `clear()`s must ask in increasing `i`.
  Location locate(std::size_t i) {
    while (cursor_ + 1 < node_count_ && nodes_[cursor_ + 1].first <= i) {
      ++cursor_;
    }
    const NodeEntry& entry = nodes_[cursor_];
    std::size_t skip = i - entry.first;
    const Node& node = *entry.node;
    for (std::size_t p = entry.param; p < node.params.size(); ++p) {
      const std::vector<std::uint8_t>& bytes = node.params[p].bytes;
      for (std::size_t at = p == entry.param ? entry.word : 0; at < bytes.size() / 8; ++at) {
        if (load_le64(bytes.data() + 8 * at) - low_ <= span_) {
          if (skip == 0) {
            return {&node, static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(8 * at)};
          }
          --skip;
        }
      }
    }
    return {};  // unreachable for a word of this batch
  }

  void clear() {
    size_ = 0;
    node_count_ = 0;
    cursor_ = 0;
  }

 private:
  static constexpr std::size_t kNodeCapacity = 1024;

  // Argument `p` of `node` does not fit: its words go in as they fit, flushing between.
  template <typename Flush>
  void add_in_parts(const Node& node, std::size_t p, Flush& flush) {
    const std::vector<std::uint8_t>& bytes = node.params[p].bytes;
    const std::size_t words = bytes.size() / 8;
    std::size_t at = 0;
    while (at < words) {
      if (size_ == kCapacity) {
        flush(*this);
        nodes_[node_count_++] = {&node, 0, static_cast<std::uint32_t>(p),
                                 static_cast<std::uint32_t>(at)};
      }
      const std::size_t until = std::min(words, at + (kCapacity - size_));
      std::size_t n = size_;
      for (; at < until; ++at) {
        const Address word = load_le64(bytes.data() + 8 * at);
        words_[n] = word;
        n += word - low_ <= span_ ? 1 : 0;
      }
      size_ = n;
    }
  }

  // A node whose words start at word `first`, from argument `param`, word `word` on.
  struct NodeEntry {
    const Node* node;
    std::uint32_t first;
    std::uint32_t param;
    std::uint32_t word;
  };

  std::unique_ptr<Address[]> words_;
  std::unique_ptr<NodeEntry[]> nodes_;
  std::size_t size_ = 0;
  std::size_t node_count_ = 0;
  std::size_t cursor_ = 0;
  Address low_ = 0;
  Address span_ = 0;
  bool empty_ = true;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_WORD_BATCH_H_
