// NodeCapacity: /proc/meminfo parsing and the node member's attribute codec (round trip, and a
// precise error for every malformed attribute).
#include "cluster/policy/node_capacity.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

constexpr const char* kMeminfo =
    "MemTotal:       131072000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   65536000 kB\n"
    "HugePages_Total:       0\n";

TEST(NodeCapacityTest, ParsesMeminfoFieldsInBytes) {
  Result<int64_t> total = parse_meminfo_field(kMeminfo, "MemTotal");
  ASSERT_TRUE(total.ok()) << total.status().to_string();
  EXPECT_EQ(*total, int64_t{131072000} * 1024);
  Result<int64_t> avail = parse_meminfo_field(kMeminfo, "MemAvailable");
  ASSERT_TRUE(avail.ok());
  EXPECT_EQ(*avail, int64_t{65536000} * 1024);
  Result<int64_t> pages = parse_meminfo_field(kMeminfo, "HugePages_Total");
  ASSERT_TRUE(pages.ok());
  EXPECT_EQ(*pages, 0);
  EXPECT_EQ(parse_meminfo_field(kMeminfo, "Mem").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parse_meminfo_field("MemTotal: lots kB\n", "MemTotal").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_meminfo_field("MemTotal: -5 kB\n", "MemTotal").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(parse_meminfo_field("", "MemTotal").ok());
}

TEST(NodeCapacityTest, AttributesRoundTrip) {
  NodeCapacity c;
  c.host_id = "h2";
  c.address = "10.0.0.2:7000";
  c.cores = 16;
  c.memory_total_bytes = int64_t{128} << 30;
  c.memory_available_bytes = int64_t{100} << 30;
  c.models = {"aaa-avx2.keel", "bbb-avx2.keel"};
  c.max_tes = 4;
  c.running_tes = 1;
  c.warm_tes = 2;
  c.tes = {{"a-te-0", "a", -3, 2, int64_t{3} << 30},
           {"a-te-0-stage1", "a", -3, 2, int64_t{3} << 30, "pp-stage"},
           {"b-te-0", "b", 10, 1, 0, "prefill"}};
  c.stopped = {"c-te-0", "c-te-0-ep1"};  // stopped on a manager's command
  Result<NodeCapacity> back =
      capacity_from_attributes("h2", "10.0.0.2:7000", capacity_attributes(c));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
  c.models.clear();
  back = capacity_from_attributes("h2", "10.0.0.2:7000", capacity_attributes(c));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->models.empty());
  // An older agent's entry has no "role": colocated.
  auto attrs = capacity_attributes(c);
  attrs["tes"] = R"([{"id":"a-te-0","instance":"a","priority":0,"threads":1,"memory_bytes":0}])";
  back = capacity_from_attributes("h2", "10.0.0.2:7000", attrs);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->tes.size(), 1u);
  EXPECT_EQ(back->tes[0].role, "colocated");
  attrs.erase("stopped");  // an older agent: nothing known stopped
  back = capacity_from_attributes("h2", "10.0.0.2:7000", attrs);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(back->stopped.empty());
}

TEST(NodeCapacityTest, MalformedAttributesNameTheField) {
  NodeCapacity c;
  c.cores = 4;
  c.memory_total_bytes = 100;
  c.memory_available_bytes = 50;
  c.max_tes = 2;
  const auto with = [&](const std::string& key, const std::string& value) {
    auto attrs = capacity_attributes(c);
    if (value == "<erase>") {
      attrs.erase(key);
    } else {
      attrs[key] = value;
    }
    return capacity_from_attributes("h9", "a:1", attrs).status();
  };
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"cores", "0"},
                                                        {"cores", "four"},
                                                        {"cores", "<erase>"},
                                                        {"memory_available_bytes", "101"},
                                                        {"max_tes", "-1"},
                                                        {"running_tes", "1x"},
                                                        {"warm_tes", ""},
                                                        {"tes", "[{\"id\": 1}]"},
                                                        {"tes",
                                                         "[{\"id\":\"x\",\"instance\":\"x\","
                                                         "\"priority\":0,\"threads\":1,"
                                                         "\"memory_bytes\":0,\"role\":7}]"},
                                                        {"tes", "not json"},
                                                        {"stopped", "[3]"},
                                                        {"stopped", "x"}}) {
    const Status s = with(key, value);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << key << "=" << value;
    EXPECT_NE(s.message().find("h9"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace keel::cluster
