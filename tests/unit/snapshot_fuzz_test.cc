// Randomized robustness test of the snapshot reader and the checker: mutated snapshots either
// parse (and then round-trip through the writer and go through `check()` in each of their
// epochs) or throw graphcheck::Error with a one-line message. Anything else (a crash, a
// sanitizer report, another exception type, a report that contradicts itself) fails the test.
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <string_view>

namespace graphcheck {
namespace {

constexpr std::size_t kInputs = 100'000;
constexpr std::uint64_t kSeed = 0x6772617068636b;  // fixed: a failure reproduces exactly

// Small seeds (a few hundred bytes each) keep 100,000 inputs fast; together they hold every
// key of the format, every node type and the edge values (2^64 - 1, the top of the address
// space).
constexpr std::array<std::string_view, 3> kSeeds = {
    R"({"format":"graphcheck-snapshot","version":1,"producer":{"backend":"cupti","tool":"t"},
"epochs":[{"label":"capture","spans":[{"begin":"0x7f3a0000","size":4096,"kind":"parameter","name":"w"},
{"begin":"0x7f3b0000","size":64,"kind":"runtime","name":"kv","reason":"KV"}],
"allocations":[{"begin":"0x7f3a0000","size":8192,"pool":"default","generation":1,"label":"x.ws"}]},
{"label":"after_wake","spans":[],"allocations":[]}],
"graphs":[{"id":1,"epoch":"capture","nodes":[{"id":0,"type":"kernel","name":"gemm","params":[
{"offset":0,"size":8,"hex":"00003a7f00000000"},{"offset":8,"size":4,"hex":"01000000"}]}]}],"allow":["x.*"]})",
    R"({"format":"graphcheck-snapshot","version":1,
"epochs":[{"label":"capture","spans":[{"begin":"0x1000","size":4096,"kind":"input","name":"x"}],"allocations":[]}],
"graphs":[{"id":7,"epoch":"capture","nodes":[{"id":0,"type":"memset","dst":"0x1000","size":16},
{"id":1,"type":"mem_alloc","begin":"0x2000","size":64},{"id":2,"type":"mem_free","dptr":"0x2000"},
{"id":3,"type":"memcpy","src":"0x1000","dst":"0x2000","size":8},
{"id":4,"type":"op","name":"aten::mm","reads":[{"begin":"0x1000","size":32}],"writes":[{"begin":"0x1020","size":8}]}]}]})",
    R"({"format":"graphcheck-snapshot","version":1,"producer":{"backend":"aten"},
"epochs":[{"label":"a","spans":[{"begin":"0xffffffffffff0000","size":65535,"kind":"graph","name":"g"}],
"allocations":[{"begin":"0x0","size":1,"pool":"graph:1","generation":18446744073709551615}]}],
"graphs":[{"id":0,"epoch":"a","nodes":[{"id":18446744073709551615,"type":"event_record"},
{"id":4,"type":"child_graph","nodes":[{"id":5,"type":"host"},{"id":6,"type":"kernel","name":"k","params":[]}]},
{"id":8,"type":"conditional","bodies":[{"nodes":[{"id":9,"type":"event_wait"}]},{"nodes":[]}]}]}]})",
};

constexpr std::array<std::string_view, 24> kTokens = {"{",
                                                      "}",
                                                      "[",
                                                      "]",
                                                      ",",
                                                      ":",
                                                      "\"",
                                                      "0",
                                                      "9",
                                                      "-",
                                                      ".",
                                                      "e",
                                                      "\\",
                                                      " ",
                                                      "null",
                                                      "true",
                                                      "-1",
                                                      "0.5",
                                                      "18446744073709551616",
                                                      "1e999",
                                                      "\"0x\"",
                                                      "\"0xffffffffffffffff\"",
                                                      "\"kernel\"",
                                                      "\"capture\""};

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::string mutate(std::string text) {
    const std::size_t rounds = 1 + below(3);
    for (std::size_t round = 0; round < rounds; ++round) {
      mutate_once(text);
    }
    return text;
  }

 private:
  std::size_t below(std::size_t bound) {
    return bound == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, bound - 1)(rng_);
  }

  void mutate_once(std::string& text) {
    const std::size_t at = below(text.size() + 1);
    switch (below(9)) {
      case 0:  // replace one byte with any byte, including invalid UTF-8 and controls
        if (at < text.size()) {
          text[at] = static_cast<char>(below(256));
        }
        break;
      case 1:  // flip one bit
        if (at < text.size()) {
          text[at] = static_cast<char>(static_cast<unsigned char>(text[at]) ^ (1U << below(8)));
        }
        break;
      case 2:  // delete a short run
        text.erase(std::min(at, text.size()), 1 + below(8));
        break;
      case 3:
      case 4:  // insert JSON punctuation, digits, quotes or an interesting literal
        text.insert(at, kTokens[below(kTokens.size())]);
        break;
      case 5: {  // splice a piece of some seed in, inserted or replacing a run
        const std::string_view donor = kSeeds[below(kSeeds.size())];
        const std::size_t from = below(donor.size());
        const std::string piece(donor.substr(from, 1 + below(64)));
        if (below(2) == 0) {
          text.insert(at, piece);
        } else {
          text.replace(std::min(at, text.size()), piece.size(), piece);
        }
        break;
      }
      case 6:  // truncate
        text.resize(at);
        break;
      case 7: {  // replace a digit run with an edge-case number
        const std::size_t digit = text.find_first_of("0123456789", at);
        if (digit != std::string::npos) {
          const std::size_t end = text.find_first_not_of("0123456789abcdefx", digit);
          constexpr std::array<std::string_view, 6> kNumbers = {
              "0", "-0", "18446744073709551615", "18446744073709551616", "1.0", "4294967296"};
          text.replace(digit, (end == std::string::npos ? text.size() : end) - digit,
                       kNumbers[below(kNumbers.size())]);
        }
        break;
      }
      default:  // nesting: open (and maybe close) many arrays or objects
        if (below(8) == 0) {
          const std::size_t depth = 1 + below(2000);
          const bool arrays = below(2) == 0;
          std::string nest(depth, arrays ? '[' : '{');
          if (!arrays) {
            nest.clear();
            for (std::size_t i = 0; i < depth; ++i) {
              nest += "{\"a\":";
            }
          }
          text.insert(at, nest);
          if (below(2) == 0) {
            text.insert(std::min(at + nest.size() + below(8), text.size()),
                        std::string(depth, arrays ? ']' : '}'));
          }
        }
        break;
    }
  }

  std::mt19937_64 rng_;
};

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 2000)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      constexpr std::string_view kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4U];
      out += kHex[byte & 0xfU];
    }
  }
  return out;
}

// Checks `snapshot` in each of its epochs. A graphcheck::Error (a snapshot the checker
// refuses) is an outcome, counted in `refused`; the description of anything wrong is returned.
std::string check_every_epoch(const Snapshot& snapshot, std::size_t& checked,
                              std::size_t& refused) {
  for (const Epoch& epoch : snapshot.epochs) {
    try {
      CheckOptions options;
      options.epoch = epoch.label;
      const Report report = check(snapshot, options);
      ++checked;
      const Summary& summary = report.summary;
      const std::uint64_t counted =
          std::accumulate(summary.counts.begin(), summary.counts.end(), std::uint64_t{0});
      if (report.epoch != epoch.label || counted != summary.references ||
          report.findings.size() != summary.findings()) {
        return "an inconsistent report in epoch \"" + epoch.label + "\": " + to_json(report, -1);
      }
    } catch (const Error& error) {
      ++refused;
      if (std::string_view(error.what()).find('\n') != std::string_view::npos) {
        return "a check error of several lines: " + std::string(error.what());
      }
    }
  }
  return {};
}

TEST(SnapshotFuzz, EveryMutatedInputParsesRoundTripsAndChecksOrIsAOneLineError) {
  std::size_t checked = 0;
  std::size_t refused = 0;
  for (const std::string_view seed : kSeeds) {
    const Snapshot snapshot = parse_snapshot(seed, "seed");
    ASSERT_EQ(parse_snapshot(to_json(snapshot)), snapshot);
    ASSERT_EQ(check_every_epoch(snapshot, checked, refused), "");
  }
  ASSERT_EQ(refused, 0U);  // the seeds are consistent snapshots
  Mutator mutator(kSeed);
  std::size_t parsed = 0;
  std::size_t errors = 0;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < kInputs && failures < 5; ++i) {
    const std::string input = mutator.mutate(std::string(kSeeds[i % kSeeds.size()]));
    try {
      const Snapshot snapshot = parse_snapshot(input, "fuzz");
      ++parsed;
      const std::string written = to_json(snapshot);
      if (!(parse_snapshot(written, "written") == snapshot)) {
        ++failures;
        ADD_FAILURE() << "round trip changed input " << i << ": " << printable(input);
      }
      if (const std::string wrong = check_every_epoch(snapshot, checked, refused); !wrong.empty()) {
        ++failures;
        ADD_FAILURE() << wrong << " for input " << i << ": " << printable(input);
      }
    } catch (const Error& error) {
      ++errors;
      const std::string_view message = error.what();
      const bool well_formed =
          message.starts_with("fuzz: ") && message.find('\n') == std::string_view::npos &&
          (message.find(": expected ") != std::string_view::npos ||
           message.find(": missing required key \"") != std::string_view::npos ||
           message.starts_with("fuzz: not valid JSON: "));
      if (!well_formed) {
        ++failures;
        ADD_FAILURE() << "badly formed message \"" << printable(message) << "\" for input " << i
                      << ": " << printable(input);
      }
    } catch (const std::exception& error) {
      ++failures;
      ADD_FAILURE() << "non-graphcheck exception \"" << error.what() << "\" for input " << i << ": "
                    << printable(input);
    }
  }
  EXPECT_EQ(failures, 0U);
  EXPECT_EQ(parsed + errors, kInputs);
  // Both outcomes must be common, or the mutations are not exercising the reader.
  EXPECT_GT(parsed, kInputs / 50);
  EXPECT_GT(errors, kInputs / 2);
  // Every parsed snapshot has an epoch, so most of them must reach the checker's verdicts.
  EXPECT_GT(checked, parsed / 2);
  RecordProperty("parsed", static_cast<int>(parsed));
  RecordProperty("errors", static_cast<int>(errors));
  RecordProperty("checked", static_cast<int>(checked));
  RecordProperty("refused", static_cast<int>(refused));
}

TEST(SnapshotFuzz, PathologicalDocumentsAreErrors) {
  // Deep nesting is refused at level 513, open or closed, wherever it is.
  const std::string deep_open = R"({"format": )" + std::string(200'000, '[');
  EXPECT_THAT([&] { (void)parse_snapshot(deep_open, "deep"); },
              ::testing::ThrowsMessage<Error>(
                  "deep: format: expected arrays and objects nested at most 512 levels deep, "
                  "found level 513"));
  const std::string deep_closed = R"({"format": "graphcheck-snapshot", "version": )" +
                                  std::string(200'000, '[') + std::string(200'000, ']') + "}";
  EXPECT_THAT([&] { (void)parse_snapshot(deep_closed, "deep"); },
              ::testing::ThrowsMessage<Error>(::testing::StartsWith(
                  "deep: version: expected arrays and objects nested at most 512 levels deep")));
  EXPECT_THAT([&] { (void)parse_snapshot(std::string("\xef\xbb\xbf\xff", 4), "bom"); },
              ::testing::ThrowsMessage<Error>(::testing::StartsWith("bom: not valid JSON: ")));
}

}  // namespace
}  // namespace graphcheck
