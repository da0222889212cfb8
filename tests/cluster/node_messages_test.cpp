// The node agent's control messages: round trips and precise errors on malformed bodies.
#include "cluster/protocol/node_messages.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TEST(NodeMessagesTest, StartAndStopRoundTrip) {
  StartTe s;
  s.id = "te-3";
  s.model_path = "/models/m.gguf";
  s.served_model_name = "m";
  s.role = "decode";
  s.threads = 2;
  s.isa = "avx2";
  s.engine.max_num_seqs = 8;
  s.engine.ctx_size = 512;
  s.instance = "m-pd-0";
  s.priority = -5;
  s.memory_bytes = int64_t{5} << 30;
  s.election = "manager-m";
  s.fence = 7587;
  const net::Message m = encode(s);
  EXPECT_EQ(m.type, msg::kStartTe);
  Result<StartTe> back = decode_start_te(m.body);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, s);

  const StopTe stop{"te-3", 2500, "manager-m", 7588};
  Result<StopTe> stop_back = decode_stop_te(encode(stop).body);
  ASSERT_TRUE(stop_back.ok());
  EXPECT_EQ(*stop_back, stop);

  Result<Fence> fence_back = decode_fence(encode(Fence{"manager-m", 7590}).body);
  ASSERT_TRUE(fence_back.ok());
  EXPECT_EQ(*fence_back, (Fence{"manager-m", 7590}));
  EXPECT_EQ(encode(Fence{"e", 1}).type, msg::kFence);

  StartTeReply r;
  r.id = "h2-warm-te-0";
  r.address = "10.0.0.2:4000";
  r.pid = 77;
  r.warm = true;
  Result<StartTeReply> r_back = decode_start_te_reply(encode_body(r));
  ASSERT_TRUE(r_back.ok());
  EXPECT_TRUE(r_back->status.ok());
  EXPECT_EQ(r_back->address, "10.0.0.2:4000");
  EXPECT_EQ(r_back->pid, 77);
  EXPECT_TRUE(r_back->warm);
  r.status = Status::resource_exhausted("no room");
  r_back = decode_start_te_reply(encode_body(r));
  ASSERT_TRUE(r_back.ok());
  EXPECT_EQ(r_back->status.code(), StatusCode::kResourceExhausted);
}

TEST(NodeMessagesTest, AnExpertMemberStartNamesItsShard) {
  StartTe s{"m-te-0-ep1", "/models/moe.gguf", "", std::string(kEpExpertRole), 2, "avx2"};
  s.engine.ep = 3;
  s.engine.ep_member = 1;
  s.instance = "m-ep-0";
  Result<StartTe> back = decode_start_te(encode(s).body);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, s);
  // A member without its shard, or a TE naming one, is refused by the role.
  StartTe no_shard = s;
  no_shard.engine.ep_member = 0;
  EXPECT_NE(decode_start_te(encode(no_shard).body).status().message().find("'role'"),
            std::string::npos);
  StartTe te = s;
  te.role = "colocated";
  EXPECT_EQ(decode_start_te(encode(te).body).status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeMessagesTest, MalformedBodiesNameTheField) {
  const Json good = encode(StartTe{"te-0", "/m.gguf", "m", "colocated", 1, {}}).body;
  const auto broken = [&](const char* field, Json value) {
    Json b = good;
    b[field] = std::move(value);
    return decode_start_te(b).status();
  };
  for (const auto& [field, value] :
       std::vector<std::pair<const char*, Json>>{{"id", 5},
                                                 {"id", "a/b"},
                                                 {"model_path", ""},
                                                 {"role", "both"},
                                                 {"threads", 0},
                                                 {"threads", "2"},
                                                 {"isa", 3},
                                                 {"engine", "x"},
                                                 {"engine", Json{{"v", 1}, {"kv_type", "q4"}}},
                                                 {"engine", Json{{"v", 2}}},
                                                 {"priority", "high"},
                                                 {"memory_bytes", -1},
                                                 {"fence", -3},
                                                 {"fence", "9"},
                                                 {"election", 3}}) {
    const Status s = broken(field, value);
    if (std::string_view(field) != "engine" || value.is_string() || value["v"] == 1) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    } else {  // a newer engine spec: the agent's keel is older than the manager's
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.to_string();
    }
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  }
  Json no_id = good;
  no_id.erase("id");
  EXPECT_NE(decode_start_te(no_id).status().message().find("'id' missing"), std::string::npos);
  EXPECT_FALSE(decode_start_te(Json::array()).ok());
  EXPECT_FALSE(decode_stop_te(Json{{"id", ""}}).ok());
  EXPECT_FALSE(decode_stop_te(Json{{"id", "te-0"}, {"grace_ms", -1}}).ok());
  EXPECT_FALSE(decode_stop_te(Json{{"id", "te-0"}, {"fence", 1.5}}).ok());
  EXPECT_EQ(decode_stop_te(Json{{"id", "te-0"}})->fence, 0) << "no token: sent outside an election";
  EXPECT_NE(decode_fence(Json::object()).status().message().find("'fence' missing"),
            std::string::npos);
  EXPECT_FALSE(decode_fence(Json{{"fence", -1}}).ok());
  EXPECT_FALSE(decode_start_te_reply(Json::object()).ok() &&
               decode_start_te_reply(Json::object())->status.ok());
}

}  // namespace
}  // namespace keel::cluster
