// The router tests' fixture: TEs of each role, a prefix index fed by KV events, a flat heatmap,
// a mixed fleet, and one request's routing context (Fixture::run calls route()).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/job/router.h"
#include "core/check.h"

namespace keel::cluster::router_testing {

constexpr std::string_view kModel = "m";

inline TeInfo te(std::string id, TeRole role, int64_t pending, bool healthy = true,
                 std::string model = std::string(kModel)) {
  TeInfo t;
  t.id = std::move(id);
  t.address = "127.0.0.1:0";
  t.role = role;
  t.model = std::move(model);
  t.load.pending_tokens = pending;
  t.healthy = healthy;
  return t;
}

inline TeInfo colo(std::string id, int64_t pending, bool healthy = true) {
  return te(std::move(id), TeRole::kColocated, pending, healthy);
}

inline KvEventBatch stored(std::vector<uint64_t> hashes, std::string medium = "pool") {
  BlockStored e;
  e.block_hashes = std::move(hashes);
  e.medium = std::move(medium);
  return KvEventBatch{.events = {e}};
}

inline PdHeatmap flat_heatmap(double value) {
  auto map = PdHeatmap::create({1, 100000}, {0, 100}, {{value, value}, {value, value}});
  KEEL_CHECK(map.ok());
  return *std::move(map);
}

// One request's routing context; tests adjust the fields, then call run().
struct Fixture {
  FleetSnapshot fleet;
  PrefixIndex index;
  RouterConfig config;
  std::optional<PdHeatmap> heatmap;
  std::vector<uint64_t> hashes = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t prompt_tokens = 128;
  int64_t decode_tokens = 64;
  uint64_t cursor = 0;
  std::string sticky;

  void hold(std::string_view te_id, std::vector<uint64_t> blocks, std::string medium = "pool") {
    ASSERT_TRUE(index.apply(te_id, stored(std::move(blocks), std::move(medium))).ok());
  }

  RouteDecision run() const {
    EXPECT_TRUE(config.validate().ok());
    return route(RouteInput{.fleet = fleet,
                            .index = index,
                            .heatmap = heatmap ? &*heatmap : nullptr,
                            .model = kModel,
                            .prompt_tokens = prompt_tokens,
                            .prompt_block_hashes = hashes,
                            .predicted_decode_tokens = decode_tokens,
                            .config = config,
                            .cursor = cursor,
                            .sticky_te_id = sticky});
  }
};

// Colocated TE c-0, two prefill TEs and two decode TEs.
inline FleetSnapshot mixed_fleet() {
  FleetSnapshot fleet;
  fleet.tes = {colo("c-0", 100), te("p-0", TeRole::kPrefill, 100), te("p-1", TeRole::kPrefill, 100),
               te("d-0", TeRole::kDecode, 500), te("d-1", TeRole::kDecode, 50)};
  return fleet;
}

}  // namespace keel::cluster::router_testing
