// The JE replacer's pure pieces: a replacement's command (same port, the TEs serving now, a short
// TE connect timeout; the --te flag dropped when there are none) and which TEs it is given (the
// snapshot's serving ones and the manager's TEs started since).
#include "cluster/je_replacer.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;

TEST(JeReplacerTest, AReplacementListensAtTheSamePortAndRoutesToTheTesServingNow) {
  const std::vector<std::string> argv = {"keel", "je",   "--id",    "je-0", "--port",
                                         "0",    "--te", "a:1,b:2", "-m",   "x.gguf"};
  const std::vector<std::string> got = je_replacement_argv(argv, 7001, {"b:2", "c:3"}, 2000ms);
  EXPECT_EQ(got, (std::vector<std::string>{"keel", "je", "--id", "je-0", "--port", "7001", "--te",
                                           "b:2,c:3", "-m", "x.gguf", "--te-connect-timeout-ms",
                                           "2000"}));
  // No TE serving (the autoscaler adds them): no --te flag at all.
  const std::vector<std::string> none = je_replacement_argv(argv, 7001, {}, 500ms);
  EXPECT_EQ(std::find(none.begin(), none.end(), "--te"), none.end());
  EXPECT_EQ(none.back(), "500");
  // Applied twice (a second death): the same flags, not appended again.
  EXPECT_EQ(je_replacement_argv(got, 7001, {"b:2", "c:3"}, 2000ms), got);
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
