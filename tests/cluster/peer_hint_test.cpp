// The JE's tier-T3 hint: the peer holding the most leading blocks beyond the chosen TE's own,
// pool-held first on a tie; none when the chosen TE or the peers run no fetch service, when a
// peer is unhealthy, or when nobody holds more.
#include "cluster/job/peer_hint.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::cluster {
namespace {

PeerCandidate te(std::string id, int32_t blocks, int32_t pool, std::string address = "fetch") {
  PeerCandidate c;
  c.te_id = id;
  c.fetch_address = address.empty() ? "" : address + "-" + id;
  c.match = PrefixMatch{blocks, pool, blocks - pool};
  return c;
}

TEST(PeerHintTest, PointsAtThePeerHoldingTheMostBeyondTheChosenTe) {
  const std::vector<PeerCandidate> tes = {te("a", 1, 1), te("b", 5, 2), te("c", 3, 3)};
  const std::optional<PeerHint> h = choose_peer_hint("a", tes);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(*h, (PeerHint{"b", "fetch-b", 1, 5}));
  // The chosen TE already holds the most: nothing to fetch.
  EXPECT_FALSE(choose_peer_hint("b", tes).has_value());
}

TEST(PeerHintTest, TieGoesToThePoolHeldRun) {
  const std::vector<PeerCandidate> tes = {te("a", 0, 0), te("b", 4, 1), te("c", 4, 4)};
  const std::optional<PeerHint> h = choose_peer_hint("a", tes);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->te_id, "c");
  EXPECT_EQ(h->skip_blocks, 0);
}

TEST(PeerHintTest, NoHintWithoutFetchServicesOrHealthyPeers) {
  // The chosen TE cannot fetch.
  EXPECT_FALSE(choose_peer_hint("a", std::vector{te("a", 0, 0, ""), te("b", 4, 4)}).has_value());
  // The only holder serves no fetches, or is unhealthy.
  EXPECT_FALSE(choose_peer_hint("a", std::vector{te("a", 0, 0), te("b", 4, 4, "")}).has_value());
  std::vector<PeerCandidate> sick = {te("a", 0, 0), te("b", 4, 4)};
  sick[1].healthy = false;
  EXPECT_FALSE(choose_peer_hint("a", sick).has_value());
  // An unknown chosen TE.
  EXPECT_FALSE(choose_peer_hint("z", std::vector{te("a", 0, 0), te("b", 4, 4)}).has_value());
  // Equal runs: nothing gained.
  EXPECT_FALSE(choose_peer_hint("a", std::vector{te("a", 2, 0), te("b", 2, 2)}).has_value());
}

}  // namespace
}  // namespace keel::cluster
