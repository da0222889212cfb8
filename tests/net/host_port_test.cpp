// parse_host_port: the one parser of "host:port" the control links and the KV services share.
#include "net/host_port.h"

#include <gtest/gtest.h>

namespace keel::net {
namespace {

TEST(HostPortTest, SplitsAtTheLastColon) {
  Result<HostPort> hp = parse_host_port("127.0.0.1:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  hp = parse_host_port("localhost:65535");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->port, 65535);
}

TEST(HostPortTest, RejectsWhatIsNotHostColonPort) {
  for (const char* bad : {"", "127.0.0.1", ":80", "host:", "host:0", "host:65536", "host:8a",
                          "host:-1", "host: 80"}) {
    const Result<HostPort> hp = parse_host_port(bad);
    EXPECT_EQ(hp.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace keel::net
