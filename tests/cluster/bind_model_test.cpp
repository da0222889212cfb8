// The warm pool's bind messages (cluster/protocol/bind_model.h): round trips, total decoding of bad
// bodies, phase durations; and BindListener taking exactly one bind over a real link.
#include "cluster/protocol/bind_model.h"

#include <gtest/gtest.h>

#include <thread>

#include "cluster/task/bind_listener.h"

namespace keel::cluster {
namespace {

TEST(BindModelTest, RoundTrips) {
  BindModel b{"/m.gguf", "keel-store-00000000000000ff-l1-avx2", "decode", 1234};
  const net::Message m = encode_bind_model(b);
  EXPECT_EQ(m.type, kBindModel);
  auto back = decode_bind_model(m.body);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->model_path, b.model_path);
  EXPECT_EQ(back->store_entry, b.store_entry);
  EXPECT_EQ(back->role, "decode");
  EXPECT_EQ(back->decision_ns, 1234);
  EXPECT_FALSE(back->engine.has_value());
  EXPECT_EQ(back->isa, "");
  b.engine = TeEngineSpec{};
  b.engine->max_num_seqs = 8;
  b.engine->ctx_size = 256;
  b.isa = "avx2";
  back = decode_bind_model(encode_bind_model(b).body);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->engine, b.engine);
  EXPECT_EQ(back->isa, "avx2");

  BindReply r;
  r.port = 4321;
  r.from_store = true;
  r.phases = {100, 200, 400, 800, 1600, 3200};
  auto rb = decode_bind_reply(encode_bind_reply(r));
  ASSERT_TRUE(rb.ok());
  EXPECT_TRUE(rb->status.ok());
  EXPECT_EQ(rb->port, 4321);
  EXPECT_TRUE(rb->from_store);
  EXPECT_EQ(rb->phases.first_token_ns, 1600);
  EXPECT_EQ(rb->phases.announced_ns, 3200);

  BindReply failed;
  failed.status = Status::not_found("no such model");
  auto fb = decode_bind_reply(encode_bind_reply(failed));
  ASSERT_TRUE(fb.ok());
  EXPECT_FALSE(fb->status.ok());
  EXPECT_NE(fb->status.message().find("no such model"), std::string::npos);
}

TEST(BindModelTest, BadBodiesAreErrorsNotCrashes) {
  EXPECT_FALSE(decode_bind_model(Json::object()).ok());
  EXPECT_FALSE(decode_bind_model(Json{{"model_path", 5}}).ok());
  EXPECT_FALSE(decode_bind_model(Json{{"model_path", ""}}).ok());  // names no model
  EXPECT_FALSE(decode_bind_model(Json::array()).ok());
  EXPECT_FALSE(decode_bind_model(Json{{"model_path", "/m"}, {"engine", "-c 5"}}).ok());
  EXPECT_FALSE(decode_bind_model(Json{{"model_path", "/m"}, {"engine", {{"ctx_size", 5}}}}).ok());
  EXPECT_EQ(decode_bind_model(Json{{"model_path", "/m"}, {"engine", {{"v", 9}}}}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(decode_bind_reply(Json{{"ok", true}}).ok());
  EXPECT_FALSE(decode_bind_reply(Json{{"ok", true}, {"port", 1}, {"phases", {{"x", 1}}}}).ok());
}

TEST(BindModelTest, PhaseSecondsAreTheGapsBetweenMarks) {
  const Json s =
      phase_seconds({0, 1'000'000'000, 1'500'000'000, 2'000'000'000, 2'250'000'000, 2'500'000'000});
  EXPECT_DOUBLE_EQ(s["scaler_pre"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["pre_load"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["load"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["post_load"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["announce"].get<double>(), 0.25);
}

TEST(BindListenerTest, TakesOneBindAndRefusesASecond) {
  auto listener = BindListener::start("127.0.0.1");
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  const int port = (*listener)->port();
  std::thread owner([&] {
    std::optional<BindModel> b = (*listener)->wait(std::chrono::seconds(10));
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->model_path, "/a.gguf");
    BindReply r;
    r.port = 777;
    EXPECT_TRUE((*listener)->reply(r));
  });
  auto reply =
      bind_warm_te("127.0.0.1", port, {"/a.gguf", "", "colocated", 1}, std::chrono::seconds(10));
  owner.join();
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(reply->port, 777);
  auto second =
      bind_warm_te("127.0.0.1", port, {"/b.gguf", "", "colocated", 2}, std::chrono::seconds(10));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->status.ok());
  EXPECT_NE(second->status.message().find("bound already"), std::string::npos);
}

}  // namespace
}  // namespace keel::cluster
