// PD profiling's pure part: the grid's cells (decode length = round(ratio × prefill), at least
// 1; context checked), the heatmap values from JCT samples (colocated / disaggregated − 1, means
// over samples), precise errors for bad grids and samples, and the written file parsing back
// through PdHeatmap with the provenance keys alongside.
#include "cluster/job/pd_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace keel::cluster {
namespace {

std::string error_of(const Status& s) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  return s.message();
}

TEST(PdProfileTest, CellsAreRowMajorWithRoundedDecodeLengths) {
  auto cells = plan_pd_profile({{32, 100}, {0.0, 0.25, 2.0}}, 512);
  ASSERT_TRUE(cells.ok()) << cells.error().to_string();
  ASSERT_EQ(cells->size(), 6u);
  const std::vector<std::pair<int64_t, int64_t>> want = {{32, 1},  {32, 8},   {32, 64},
                                                         {100, 1}, {100, 25}, {100, 200}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*cells)[i].row, i / 3);
    EXPECT_EQ((*cells)[i].col, i % 3);
    EXPECT_EQ((*cells)[i].prefill_tokens, want[i].first) << i;
    EXPECT_EQ((*cells)[i].decode_tokens, want[i].second) << i;
  }
}

TEST(PdProfileTest, CellOverTheContextIsNamed) {
  auto cells = plan_pd_profile({{64, 256}, {1.0}}, 511);
  ASSERT_FALSE(cells.ok());
  const std::string msg = error_of(cells.error());
  EXPECT_NE(msg.find("prefill 256"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("511"), std::string::npos) << msg;
  EXPECT_TRUE(plan_pd_profile({{64, 256}, {1.0}}, 512).ok());
  EXPECT_TRUE(plan_pd_profile({{64, 256}, {1.0}}, 0).ok());  // 0: no limit
}

TEST(PdProfileTest, BadGridsAreRejectedPrecisely) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of(plan_pd_profile({{}, {1.0}}, 0).error()).find("prefill lengths is empty"),
            std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{32}, {}}, 0).error()).find("ratios is empty"),
            std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{0}, {1.0}}, 0).error()).find("must be > 0"),
            std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{64, 32}, {1.0}}, 0).error()).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{32}, {1.0, 1.0}}, 0).error()).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{32}, {-0.5}}, 0).error()).find(">= 0"), std::string::npos);
  EXPECT_NE(error_of(plan_pd_profile({{32}, {nan}}, 0).error()).find("finite"), std::string::npos);
}

TEST(PdProfileTest, ValuesAreMeanColocatedOverMeanDisaggregatedMinusOne) {
  const PdProfileGrid grid{{32, 64}, {0.5, 1.0}};
  std::vector<PdCellSamples> samples = {
      {{1.0, 3.0}, {1.0}},  // 2 / 1 − 1 = 1
      {{1.0}, {2.0}},       // −0.5
      {{0.5}, {0.5, 0.5}},  // 0
      {{0.9}, {0.6, 1.2}},  // 0.9 / 0.9 − 1 = 0
  };
  auto map = build_pd_profile(grid, samples);
  ASSERT_TRUE(map.ok()) << map.error().to_string();
  EXPECT_EQ(map->prefill_bins(), (std::vector<double>{32, 64}));
  EXPECT_EQ(map->ratio_bins(), (std::vector<double>{0.5, 1.0}));
  EXPECT_DOUBLE_EQ(map->values()[0][0], 1.0);
  EXPECT_DOUBLE_EQ(map->values()[0][1], -0.5);
  EXPECT_DOUBLE_EQ(map->values()[1][0], 0.0);
  EXPECT_NEAR(map->values()[1][1], 0.0, 1e-12);
  // The router's lookup reads what was measured: prefill 32, decode 16 is cell (0, 0).
  EXPECT_DOUBLE_EQ(map->lookup(32, 16), 1.0);
}

TEST(PdProfileTest, MissingOrBadSamplesAreNamed) {
  const PdProfileGrid grid{{32}, {0.5, 1.0}};
  auto short_samples = build_pd_profile(grid, {{{1.0}, {1.0}}});
  ASSERT_FALSE(short_samples.ok());
  EXPECT_NE(error_of(short_samples.error()).find("samples for 1 cells, but the grid has 2"),
            std::string::npos);
  auto empty = build_pd_profile(grid, {{{1.0}, {1.0}}, {{1.0}, {}}});
  ASSERT_FALSE(empty.ok());
  const std::string msg = error_of(empty.error());
  EXPECT_NE(msg.find("ratio 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("disaggregated: no JCT samples"), std::string::npos) << msg;
  auto zero = build_pd_profile(grid, {{{1.0}, {1.0}}, {{0.0}, {1.0}}});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(error_of(zero.error()).find("not a positive finite number"), std::string::npos);
}

TEST(PdProfileTest, FileParsesAsAHeatmapAndCarriesProvenance) {
  const PdProfileGrid grid{{32}, {0.5, 1.0}};
  const std::vector<PdCellSamples> samples = {{{0.2}, {0.1}}, {{0.3}, {0.6}}};
  auto map = build_pd_profile(grid, samples);
  ASSERT_TRUE(map.ok());
  PdProfileProvenance p;
  p.model = "m.gguf";
  p.date = "2026-12-02T01:00:00Z";
  p.threads_per_te = 1;
  p.requests_per_cell = 4;
  p.concurrency = 2;
  const std::string text = pd_profile_json(*map, samples, p);
  auto back = PdHeatmap::parse(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->values(), map->values());
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["model"], "m.gguf");
  EXPECT_EQ(doc["requests_per_cell"], 4);
  EXPECT_EQ(doc["threads_per_te"], 1);
  EXPECT_DOUBLE_EQ(doc["jct_colocated_ms"][0][1].get<double>(), 300.0);
  EXPECT_DOUBLE_EQ(doc["jct_disaggregated_ms"][0][0].get<double>(), 100.0);
}

}  // namespace
}  // namespace keel::cluster
