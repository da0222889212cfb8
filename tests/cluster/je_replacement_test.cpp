// The JE replacer's pure pieces: a replacement's spec (same port, the TEs serving now, a short
// TE connect timeout) and which TEs it is given (the
// snapshot's serving ones and the manager's TEs started since).
#include "cluster/policy/je_replacement.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;

TEST(JeReplacerTest, AReplacementListensAtTheSamePortAndRoutesToTheTesServingNow) {
  JeSpec spec;
  spec.id = "je-0";
  spec.tes = {"a:1", "b:2"};
  spec.model_path = "x.gguf";
  spec.router = "prefix";
  const JeSpec got = je_replacement_spec(spec, 7001, {"b:2", "c:3"}, 2000ms);
  JeSpec want = spec;  // everything else as started
  want.port = 7001;
  want.tes = {"b:2", "c:3"};
  want.te_connect_timeout_ms = 2000;
  EXPECT_EQ(got, want);
  // No TE serving (the autoscaler adds them): none handed on.
  const JeSpec none = je_replacement_spec(spec, 7001, {}, 500ms);
  EXPECT_TRUE(none.tes.empty());
  EXPECT_EQ(none.te_connect_timeout_ms, 500);
  // Applied twice (a second death): the same spec.
  EXPECT_EQ(je_replacement_spec(got, 7001, {"b:2", "c:3"}, 2000ms), got);
}

TEST(JeReplacerTest, ServingTesAndTheManagersNewOnesAreHandedOn) {
  FleetSnapshot fleet;
  for (const auto& [address, state] :
       {std::pair{"a:1", health::TeState::kHealthy}, std::pair{"b:2", health::TeState::kBusy},
        std::pair{"c:3", health::TeState::kHung}, std::pair{"d:4", health::TeState::kDead}}) {
    TeInfo te;
    te.address = address;
    te.state = state;
    fleet.tes.push_back(te);
  }
  EXPECT_EQ(replacement_te_addresses(fleet, {}), (std::vector<std::string>{"a:1", "b:2"}));
  // The manager's own TEs: one started since the snapshot (e:5) is added; one the snapshot lists
  // hung (c:3, being replaced) stays out; one listed serving is not repeated.
  EXPECT_EQ(replacement_te_addresses(fleet, {"a:1", "c:3", "e:5"}),
            (std::vector<std::string>{"a:1", "b:2", "e:5"}));
}

}  // namespace
}  // namespace keel::cluster
