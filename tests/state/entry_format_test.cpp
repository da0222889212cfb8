// Entry files and log frames: round trips, and each kind of damage (short header, foreign magic,
// damaged header, truncated or extended payload, flipped payload byte) reported by name; a log's
// torn or damaged tail ends its intact prefix.
#include "state/entry_format.h"

#include <gtest/gtest.h>

#include <string>

namespace keel::state {
namespace {

std::string entry_file(std::string_view payload) {
  return encode_entry_header(payload) + std::string(payload);
}

std::string error_of(std::string_view file) {
  Result<std::string_view> r = decode_entry(file, "x.rec");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(EntryFormatTest, EntryRoundTrips) {
  for (const std::string& payload :
       {std::string(), std::string("{\"a\":1}"), std::string(100000, '\xab')}) {
    const std::string file = entry_file(payload);
    ASSERT_EQ(file.size(), kEntryHeaderBytes + payload.size());
    Result<std::string_view> r = decode_entry(file, "x.rec");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, payload);
  }
}

TEST(EntryFormatTest, EachDamageIsNamed) {
  const std::string good = entry_file("hello, state");
  EXPECT_NE(error_of(good.substr(0, 20)).find("shorter than the 32-byte header"),
            std::string::npos);
  std::string foreign = good;
  foreign[0] = 'X';
  EXPECT_NE(error_of(foreign).find("not a keel state entry"), std::string::npos);
  std::string header = good;
  header[9] ^= 1;  // the payload size
  EXPECT_NE(error_of(header).find("header checksum"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 3)).find("truncated: 9 of 12"),
            std::string::npos);
  EXPECT_NE(error_of(good + "zz").find("2 bytes past"), std::string::npos);
  std::string flipped = good;
  flipped.back() ^= 0x40;
  EXPECT_NE(error_of(flipped).find("payload checksum"), std::string::npos);
  EXPECT_EQ(error_of(flipped).rfind("x.rec: ", 0), 0u);  // names the file
}

TEST(EntryFormatTest, FramesScanInOrder) {
  const std::string log = encode_frame("one") + encode_frame("") + encode_frame("three");
  const FrameScan s = scan_frames(log);
  EXPECT_TRUE(s.problem.empty()) << s.problem;
  ASSERT_EQ(s.payloads.size(), 3u);
  EXPECT_EQ(s.payloads[0], "one");
  EXPECT_EQ(s.payloads[1], "");
  EXPECT_EQ(s.payloads[2], "three");
  EXPECT_EQ(s.intact_bytes, log.size());
  EXPECT_TRUE(scan_frames("").payloads.empty());
}

TEST(EntryFormatTest, TornOrDamagedTailEndsTheIntactPrefix) {
  const std::string a = encode_frame("first");
  const std::string b = encode_frame("second entry");
  // Every cut inside the second frame keeps exactly the first.
  for (size_t cut = 1; cut < b.size(); ++cut) {
    const FrameScan s = scan_frames(a + b.substr(0, cut));
    ASSERT_EQ(s.payloads.size(), 1u) << cut;
    EXPECT_EQ(s.intact_bytes, a.size());
    EXPECT_NE(s.problem.find("cut short at byte " + std::to_string(a.size())), std::string::npos)
        << s.problem;
  }
  std::string damaged = a + b;
  damaged[a.size() + kFrameHeaderBytes + 2] ^= 0x10;
  FrameScan s = scan_frames(damaged);
  EXPECT_EQ(s.payloads.size(), 1u);
  EXPECT_NE(s.problem.find("checksum mismatch"), std::string::npos);
  s = scan_frames(a + "garbage-garbage-garbage");
  EXPECT_EQ(s.payloads.size(), 1u);
  EXPECT_NE(s.problem.find("no frame at byte"), std::string::npos);
}

}  // namespace
}  // namespace keel::state
