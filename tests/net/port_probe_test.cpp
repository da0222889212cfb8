// probe_listen: a port something listens on is named in use; the same port once free, and port 0,
// are Ok; a host that is not this machine's is an error, not a crash.
#include "net/port_probe.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

namespace keel::net {
namespace {

TEST(PortProbeTest, APortInUseIsNamedAndAFreeOneIsOk) {
  boost::asio::io_context io;
  uint16_t port = 0;
  {
    boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = taken.local_endpoint().port();
    const Status s = probe_listen("127.0.0.1", port);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("cannot listen on 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("in use"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(probe_listen("127.0.0.1", port).ok());
  EXPECT_TRUE(probe_listen("127.0.0.1", 0).ok());
  EXPECT_FALSE(probe_listen("no-such-host.invalid", 8080).ok());
}

}  // namespace
}  // namespace keel::net
