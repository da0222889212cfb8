// The preload forecast (store/preload_plan.h): the EWMA, and plan_preloads driven by a request
// rate trace in which demand moves from model A to model B — B is preloaded and A evicted to make
// room within a budget that holds one of them.
#include "store/preload_plan.h"

#include <gtest/gtest.h>

#include <map>

namespace keel::store {
namespace {

TEST(PreloadPlanTest, EwmaMovesHalfWayPerHalfLife) {
  EXPECT_DOUBLE_EQ(ewma_rate(0.0, 10.0, 5.0, 5.0), 5.0);
  EXPECT_DOUBLE_EQ(ewma_rate(4.0, 4.0, 1.0, 5.0), 4.0);
  EXPECT_DOUBLE_EQ(ewma_rate(4.0, 0.0, 0.0, 5.0), 4.0);  // no time passed
  EXPECT_NEAR(ewma_rate(8.0, 0.0, 10.0, 5.0), 2.0, 1e-12);
}

TEST(PreloadPlanTest, RateTraceMovesTheStoreFromAToB) {
  const uint64_t gib = uint64_t{1} << 30;
  std::map<std::string, double> rate = {{"A", 0.0}, {"B", 0.0}};
  std::map<std::string, bool> resident = {{"A", false}, {"B", false}};
  // Requests per second in each 1 s interval: A busy, then B busy.
  const std::vector<std::pair<double, double>> trace = {{5, 0}, {5, 0}, {5, 0}, {0, 0}, {0, 8},
                                                        {0, 8}, {0, 8}, {0, 8}, {0, 8}, {0, 8}};
  std::vector<std::vector<PreloadAction>> steps;
  for (const auto& [a, b] : trace) {
    rate["A"] = ewma_rate(rate["A"], a, 1.0, 2.0);
    rate["B"] = ewma_rate(rate["B"], b, 1.0, 2.0);
    PreloadSnapshot snap;
    snap.budget_bytes = 3 * gib;  // room for one 2 GiB model
    snap.models = {{"A", 2 * gib, rate["A"], resident["A"]},
                   {"B", 2 * gib, rate["B"], resident["B"]}};
    steps.push_back(plan_preloads(snap));
    for (const PreloadAction& act : steps.back()) {
      resident[act.model] = act.kind == PreloadActionKind::kPreload;
    }
  }
  using K = PreloadActionKind;
  EXPECT_EQ(steps[0], (std::vector<PreloadAction>{{K::kPreload, "A"}}));
  EXPECT_TRUE(steps[1].empty());
  // B overtakes A once its EWMA passes A's: A goes first, then B comes in.
  size_t switch_step = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].empty() && i > 0) switch_step = i;
  }
  ASSERT_GT(switch_step, 3u);
  EXPECT_EQ(steps[switch_step], (std::vector<PreloadAction>{{K::kEvict, "A"}, {K::kPreload, "B"}}));
  EXPECT_FALSE(resident["A"]);
  EXPECT_TRUE(resident["B"]);
}

TEST(PreloadPlanTest, KeepsResidentModelsWhenThereIsRoomAndSkipsColdOnes) {
  PreloadSnapshot snap;
  snap.budget_bytes = 10;
  snap.min_rate = 0.5;
  snap.models = {{"idle", 4, 0.0, true}, {"hot", 5, 3.0, false}, {"cold", 1, 0.1, false}};
  // Room for hot beside idle: nothing is evicted; cold is below min_rate.
  EXPECT_EQ(plan_preloads(snap),
            (std::vector<PreloadAction>{{PreloadActionKind::kPreload, "hot"}}));
  snap.models.push_back({"warm", 3, 1.0, false});  // hot + warm = 8: idle (4) must go
  EXPECT_EQ(plan_preloads(snap),
            (std::vector<PreloadAction>{{PreloadActionKind::kEvict, "idle"},
                                        {PreloadActionKind::kPreload, "hot"},
                                        {PreloadActionKind::kPreload, "warm"}}));
  snap.budget_bytes = 0;
  EXPECT_TRUE(plan_preloads(snap).empty());
}

}  // namespace
}  // namespace keel::store
