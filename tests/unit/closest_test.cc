// detail::closest_word: the "did you mean" of the CLI's and the checker's errors.
#include "graphcheck/detail/closest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphcheck::detail {
namespace {

const std::vector<std::string> kEpochs = {"capture", "after_sleep", "after_wake", "after_reload"};

TEST(ClosestWord, ATypoOfOneWordIsThatWord) {
  EXPECT_EQ(closest_word("after_relaod", kEpochs), "after_reload");  // a swap is one edit
  EXPECT_EQ(closest_word("captur", kEpochs), "capture");
  EXPECT_EQ(closest_word("--epcoh", {"--epoch", "--baseline", "--format"}), "--epoch");
}

TEST(ClosestWord, NothingNearTheWordItselfOrATieIsNoGuess) {
  EXPECT_EQ(closest_word("after_nap", kEpochs), "");  // 5 edits from the nearest
  EXPECT_EQ(closest_word("capture", kEpochs), "");    // known: nothing to suggest
  EXPECT_EQ(closest_word("ab", {"ac", "ad"}), "");    // two as near
  EXPECT_EQ(closest_word("ab", {"ab", "ac"}), "");    // the word is known
  EXPECT_EQ(closest_word("x", {}), "");
  EXPECT_EQ(closest_word("", {"a"}), "a");  // one edit, the floor of the limit
  EXPECT_EQ(did_you_mean("chek", {"check", "report"}), "; did you mean \"check\"?");
  EXPECT_EQ(did_you_mean("zzz", {"check", "report"}), "");
  // Past 256 bytes nothing is compared (20 KB labels against a 20 KB word took seconds).
  EXPECT_EQ(closest_word(std::string(300, 'a'), {std::string(301, 'a')}), "");
  EXPECT_EQ(closest_word("abc", {std::string(300, 'a'), "abd"}), "abd");
  // What a message quotes is escaped: a NUL in a label ended the message there.
  EXPECT_EQ(did_you_mean("cap", {std::string("ca\0p", 4)}), "; did you mean \"ca\\0p\"?");
}

}  // namespace
}  // namespace graphcheck::detail
