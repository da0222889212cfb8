// check_gang: a placed gang's processes checked against what the hosts' agents list — a process
// seen and then missing is lost, one never seen yet gets a few checks, one its agent stopped on a
// manager's command is stopped (not lost), a host that is no longer listed loses everything it
// ran. Pure: no processes.
#include "cluster/policy/gang_health.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

std::vector<WatchedProcess> ep_gang() { return {{"m-te-0-ep1", "h2"}, {"m-te-0", "h1"}}; }

TEST(GangHealthTest, ProcessesListedByTheirHostsAreSeenAndNotLost) {
  std::vector<WatchedProcess> g = ep_gang();
  EXPECT_TRUE(check_gang(g, {{"h1", {"m-te-0", "other"}}, {"h2", {"m-te-0-ep1"}}}, 3).lost.empty());
  EXPECT_TRUE(g[0].seen);
  EXPECT_TRUE(g[1].seen);
}

TEST(GangHealthTest, AProcessSeenAndThenMissingIsLost) {
  std::vector<WatchedProcess> g = ep_gang();
  ASSERT_TRUE(check_gang(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).lost.empty());
  EXPECT_EQ(check_gang(g, {{"h1", {"m-te-0"}}, {"h2", {}}}, 3).lost,
            (std::vector<std::string>{"m-te-0-ep1"}));
  // The leader gone, its member still listed: the leader is the one lost.
  g = ep_gang();
  ASSERT_TRUE(check_gang(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).lost.empty());
  EXPECT_EQ(check_gang(g, {{"h1", {}}, {"h2", {"m-te-0-ep1"}}}, 3).lost,
            (std::vector<std::string>{"m-te-0"}));
}

TEST(GangHealthTest, AProcessNeverSeenGetsAFewChecksFirst) {
  // An agent publishes its list after it answered the start: a fresh process may not be listed.
  std::vector<WatchedProcess> g = ep_gang();
  const std::vector<HostProcesses> hosts = {{"h1", {"m-te-0"}}, {"h2", {}}};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(check_gang(g, hosts, 3).lost.empty()) << i;
  EXPECT_EQ(g[0].unseen_checks, 3);
  EXPECT_EQ(check_gang(g, hosts, 3).lost, (std::vector<std::string>{"m-te-0-ep1"}));
  // Listed in time: the count starts again.
  g = ep_gang();
  (void)check_gang(g, hosts, 3);
  EXPECT_TRUE(check_gang(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).lost.empty());
  EXPECT_EQ(g[0].unseen_checks, 0);
}

TEST(GangHealthTest, AProcessStoppedOnAManagersCommandIsStoppedNotLost) {
  std::vector<WatchedProcess> g = ep_gang();
  ASSERT_TRUE(check_gang(g, {{"h1", {"m-te-0"}}, {"h2", {"m-te-0-ep1"}}}, 3).lost.empty());
  // Another manager evicted the gang: its agents list both as stopped.
  const GangCheck c =
      check_gang(g, {{"h1", {}, {"m-te-0"}}, {"h2", {"m-te-0-ep1"}, {"x", "m-te-0-ep1-r1"}}}, 3);
  EXPECT_TRUE(c.lost.empty());
  EXPECT_EQ(c.stopped, (std::vector<std::string>{"m-te-0"}));
}

TEST(GangHealthTest, AHostNoLongerListedLosesEverythingItRan) {
  std::vector<WatchedProcess> g = ep_gang();
  EXPECT_EQ(check_gang(g, {{"h1", {"m-te-0"}}}, 3).lost, (std::vector<std::string>{"m-te-0-ep1"}));
  g = ep_gang();
  EXPECT_EQ(check_gang(g, {}, 3).lost, (std::vector<std::string>{"m-te-0-ep1", "m-te-0"}));
}

}  // namespace
}  // namespace keel::cluster
