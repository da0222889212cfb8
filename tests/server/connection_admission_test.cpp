// admit_connection: the per-client cap comes first, then the server-wide cap; 0 turns the
// per-client cap off.
#include "server/connection_admission.h"

#include <gtest/gtest.h>

namespace keel::server {
namespace {

TEST(ConnectionAdmissionTest, PerClientCapFirstThenTheServerCap) {
  EXPECT_EQ(admit_connection(0, 0, 10, 4), Admission::kAdmit);
  EXPECT_EQ(admit_connection(9, 3, 10, 4), Admission::kAdmit);
  EXPECT_EQ(admit_connection(5, 4, 10, 4), Admission::kClientCap);
  EXPECT_EQ(admit_connection(10, 4, 10, 4), Admission::kClientCap);  // the client's own first
  EXPECT_EQ(admit_connection(10, 3, 10, 4), Admission::kServerCap);
  EXPECT_EQ(admit_connection(12, 0, 10, 4), Admission::kServerCap);
}

TEST(ConnectionAdmissionTest, ZeroTurnsThePerClientCapOff) {
  EXPECT_EQ(admit_connection(500, 500, 1024, 0), Admission::kAdmit);
  EXPECT_EQ(admit_connection(1024, 1024, 1024, 0), Admission::kServerCap);
}

}  // namespace
}  // namespace keel::server
