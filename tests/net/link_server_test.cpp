// LinkServer: the listener that owns the links it accepts —
//   - every accepted link is listed while open; one its peer closed is not, and is dropped (its
//     threads joined) when the next one arrives;
//   - stop() closes every accepted link (the peers see them close), is idempotent, and a close
//     handler that asks for links() while the server stops does not deadlock.
#include "net/link_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/test_support.h"

namespace keel::net {
namespace {

using namespace std::chrono_literals;

using keel::testing::eventually;

std::shared_ptr<Link> connect_to(const LinkServer& server, std::atomic<int>* closed) {
  Result<std::shared_ptr<Link>> link =
      Link::connect(server.address(), 2000ms, nullptr, [closed](Link&) { closed->fetch_add(1); });
  EXPECT_TRUE(link.ok()) << link.status().message();
  return link.ok() ? *link : nullptr;
}

TEST(LinkServerTest, ListsOpenLinksAndDropsOnesTheirPeersClosed) {
  Result<std::unique_ptr<LinkServer>> server = LinkServer::start("127.0.0.1", 0, nullptr);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::atomic<int> closed{0};
  std::shared_ptr<Link> a = connect_to(**server, &closed);
  std::shared_ptr<Link> b = connect_to(**server, &closed);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(eventually([&] { return (*server)->links().size() == 2; }));
  a->close();
  EXPECT_TRUE(eventually([&] { return (*server)->links().size() == 1; }));
  std::shared_ptr<Link> c = connect_to(**server, &closed);  // its arrival drops a's server side
  ASSERT_TRUE(c);
  EXPECT_TRUE(eventually([&] { return (*server)->links().size() == 2; }));
  EXPECT_EQ(closed.load(), 1);  // only a, which this side closed
}

TEST(LinkServerTest, StopClosesEveryLinkOnceAndIsIdempotent) {
  std::atomic<int> server_closes{0};
  std::unique_ptr<LinkServer> server;
  LinkServer* self = nullptr;
  Result<std::unique_ptr<LinkServer>> started =
      LinkServer::start("127.0.0.1", 0, nullptr, [&](Link&) {
        server_closes.fetch_add(1);
        (void)self->links();  // a close handler may ask while the server stops
      });
  ASSERT_TRUE(started.ok()) << started.status().message();
  server = std::move(*started);
  self = server.get();
  std::atomic<int> client_closes{0};
  std::vector<std::shared_ptr<Link>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(connect_to(*server, &client_closes));
  ASSERT_TRUE(eventually([&] { return server->links().size() == 3; }));
  server->stop();
  EXPECT_EQ(server_closes.load(), 3);  // joined: every close handler has run
  EXPECT_TRUE(server->links().empty());
  EXPECT_TRUE(eventually([&] { return client_closes.load() == 3; }));
  server->stop();
  EXPECT_EQ(server_closes.load(), 3);
  // The port is closed: a new connection is refused.
  Result<std::shared_ptr<Link>> late = Link::connect(server->address(), 500ms, nullptr, nullptr);
  EXPECT_FALSE(late.ok());
}

}  // namespace
}  // namespace keel::net
