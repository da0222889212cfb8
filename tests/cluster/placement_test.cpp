// place_tes: the node-agent placement step function (pure): spread by free slots, bounded by
// cores and --max-tes, ties broken by the model in the store then host id, and a precise error
// when the hosts cannot take the request.
#include "cluster/policy/placement.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

NodeCapacity node(const std::string& id, int32_t cores, int32_t max_tes, int32_t running = 0,
                  std::vector<std::string> models = {}) {
  NodeCapacity n;
  n.host_id = id;
  n.address = id + ":7000";
  n.cores = cores;
  n.max_tes = max_tes;
  n.running_tes = running;
  n.models = std::move(models);
  return n;
}

std::vector<std::string> place(const std::vector<NodeCapacity>& nodes, int32_t tes,
                               int32_t threads = 1, const std::string& hint = "") {
  Result<std::vector<std::string>> r = place_tes(nodes, {tes, threads, hint});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<std::string>{};
}

TEST(PlacementTest, SpreadsOverHostsWithTheMostRoom) {
  const std::vector<NodeCapacity> nodes = {node("h1", 8, 0), node("h2", 8, 4), node("h3", 8, 4)};
  EXPECT_EQ(place(nodes, 2), (std::vector<std::string>{"h2", "h3"}));
  EXPECT_EQ(place(nodes, 4), (std::vector<std::string>{"h2", "h3", "h2", "h3"}));
}

TEST(PlacementTest, CoresRunningTesAndThreadsBoundTheSlots) {
  // h2: 8 cores / 4 threads = 2 slots, one running → 1; h3: 16 / 4 = 4, max 3 → 3.
  const std::vector<NodeCapacity> nodes = {node("h2", 8, 8, 1), node("h3", 16, 3)};
  EXPECT_EQ(place(nodes, 4, 4), (std::vector<std::string>{"h3", "h3", "h2", "h3"}));
  Result<std::vector<std::string>> r = place_tes(nodes, {5, 4, ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("room for 4 (h2: 1, h3: 3)"), std::string::npos)
      << r.status().message();
}

TEST(PlacementTest, TiesGoToTheHostHoldingTheModel) {
  const std::vector<NodeCapacity> nodes = {node("h2", 4, 2),
                                           node("h3", 4, 2, 0, {"stories-1234-avx2.keel"})};
  EXPECT_EQ(place(nodes, 1, 1, "stories"), (std::vector<std::string>{"h3"}));
  EXPECT_EQ(place(nodes, 1, 1, ""), (std::vector<std::string>{"h2"}));
}

TEST(PlacementTest, BadRequestsAndNoAgents) {
  EXPECT_EQ(place_tes({}, {1, 1, ""}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(place_tes({}, {1, 1, ""}).status().message().find("no node agents"), std::string::npos);
  EXPECT_EQ(place_tes({node("h2", 4, 4)}, {0, 1, ""}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(place_tes({node("h2", 4, 4)}, {1, 0, ""}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::cluster
