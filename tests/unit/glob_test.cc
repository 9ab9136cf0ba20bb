// Owner globs: `*` within one path component, `**` across, everything else literal.
#include "graphcheck/detail/glob.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graphcheck/detail/allowlist.h"

namespace graphcheck::detail {
namespace {

TEST(Glob, AStarStaysWithinOnePathComponent) {
  EXPECT_TRUE(glob_matches("layers.*.scale", "layers.0.scale"));
  EXPECT_TRUE(glob_matches("layers.*.scale", "layers..scale"));
  EXPECT_FALSE(glob_matches("layers.*.scale", "layers.0.mlp.scale"));
  EXPECT_FALSE(glob_matches("*.scale", "a.b.scale"));
  EXPECT_TRUE(glob_matches("*", "rope"));
  EXPECT_FALSE(glob_matches("*", "model.rope"));
  EXPECT_TRUE(glob_matches("model.*", "model.rope"));
  EXPECT_TRUE(glob_matches("*_cache", "kv_cache"));
}

TEST(Glob, TwoStarsCrossComponents) {
  EXPECT_TRUE(glob_matches("**.scale", "a.b.scale"));
  EXPECT_TRUE(glob_matches("**", ""));
  EXPECT_TRUE(glob_matches("model.**", "model.layers.0.w"));
  EXPECT_TRUE(glob_matches("a.**.z", "a.b.c.z"));
  EXPECT_TRUE(glob_matches("a**z", "a.z"));
  EXPECT_FALSE(glob_matches("a.**.z", "a.z"));  // the dots around ** are literal
  EXPECT_TRUE(glob_matches("***", "a.b"));      // '**' then '*'
}

TEST(Glob, QuestionMarkIsOneCharacterOtherThanADot) {
  EXPECT_TRUE(glob_matches("layer?", "layer7"));
  EXPECT_FALSE(glob_matches("layer?", "layer."));
  EXPECT_FALSE(glob_matches("layer?", "layer"));
}

TEST(Glob, BracketsBackslashesAndLabelsAreLiteral) {
  EXPECT_TRUE(glob_matches("experts[*].weight", "experts[3].weight"));
  EXPECT_FALSE(glob_matches("experts[0-9].weight", "experts[3].weight"));
  EXPECT_TRUE(glob_matches("experts[0-9].weight", "experts[0-9].weight"));
  EXPECT_TRUE(glob_matches(R"(a\*)", R"(a\b)"));
  EXPECT_TRUE(glob_matches("aten:aten::*", "aten:aten::mul"));
  EXPECT_TRUE(glob_matches("m.py:* in f", "m.py:213 in f"));
  EXPECT_FALSE(glob_matches("", "x"));
  EXPECT_TRUE(glob_matches("", ""));
}

TEST(Glob, AHostileGlobCostsNoMoreThanTheTable) {
  // Exponential for a backtracking matcher: many stars and a near miss.
  const std::string glob = std::string(40, '*').replace(0, 0, "a") + "b" + std::string(40, '*');
  std::string name(4000, 'a');
  // A table of ~160k cells each: a backtracking matcher would take hours here and end at the
  // tier's timeout; no clock in a unit test (speed is bench/'s).
  EXPECT_FALSE(glob_matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*c", name));
  EXPECT_TRUE(glob_matches(glob, name + "b"));
}

TEST(Glob, AStaleGlobsHintSaysWhatSlipItLikelyHolds) {
  const std::vector<std::string> owners = {"layers.0.self_attn.quant_method.packed",
                                           "layers.1.mlp.quant_method.packed", "norm.weight"};
  EXPECT_EQ(stale_glob_hint("layers.*.quant_method.packed", owners),
            "'*' stays within one dotted name: layers.**.quant_method.packed would match 2 "
            "owner(s) with findings");
  EXPECT_EQ(stale_glob_hint("norm.weight  # the final norm", owners),
            "a comment must be on a line of its own: this glob ends in '# the final norm'");
  // Nothing a wider glob would reach, a glob written with `**` already, or no star at all.
  EXPECT_EQ(stale_glob_hint("experts.*.w13", owners), "");
  EXPECT_EQ(stale_glob_hint("layers.**.scale", owners), "");
  EXPECT_EQ(stale_glob_hint("lm_head.weight", owners), "");
  EXPECT_EQ(stale_glob_hint("layers.*.quant_method.packed", {}), "");
}

// The allowlist tests a glob's literal prefix and suffix before the matcher: it must answer
// exactly as the matcher does, for every glob shape (7k globs against 7k owners took 13 s).
TEST(Glob, TheAllowlistsQuickTestsNeverChangeTheAnswer) {
  const std::vector<std::string> globs = {"layers.0.scale",
                                          "layers.*.scale",
                                          "*.scale",
                                          "layers.**",
                                          "**.w",
                                          "a?c",
                                          "*",
                                          "**",
                                          "layers.*",
                                          "x*y*z",
                                          "[0].w",
                                          "a.**.z",
                                          "sc*le",
                                          "layers.0.scale.x"};
  const std::vector<std::string> names = {"layers.0.scale",
                                          "layers.12.scale",
                                          "layers.0.mlp.scale",
                                          "abc",
                                          "a.c",
                                          "rope",
                                          "a.b.w",
                                          "[0].w",
                                          "xyz",
                                          "x.y.z",
                                          "a.z",
                                          "a.b.z",
                                          "scale",
                                          "sc",
                                          "layers.0.scale.x",
                                          "w"};
  for (const std::string& glob : globs) {
    const Allowlist allowlist({glob});
    for (const std::string& name : names) {
      const std::string* one[] = {&name};
      EXPECT_EQ(allowlist.allows(one, 1), glob_matches(glob, name)) << glob << " ~ " << name;
    }
  }
}

}  // namespace
}  // namespace graphcheck::detail
