// The cluster's messages: every message round-trips through a link frame exactly; malformed
// bodies are InvalidArgument naming the field; a reply's Status survives the trip. With
// KEEL_WRITE_FUZZ_SEEDS=DIR set, the frames are also written there as the fuzz target's seeds
// (tests/fuzz/corpus/cluster_messages_fuzz/).
#include "cluster/protocol/messages.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace keel::cluster {
namespace {

// Encodes, frames, unframes: the body the receiver's decoder sees.
Json through_link(const net::Message& m, const std::string& seed_name) {
  const std::vector<uint8_t> bytes = net::encode_message(m);
  if (const char* dir = std::getenv("KEEL_WRITE_FUZZ_SEEDS")) {
    std::ofstream(std::string(dir) + "/" + seed_name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  Result<net::Message> back = net::decode_message(bytes);
  EXPECT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->type, m.type);
  return back->body;
}

engine::GenerationRequest sample_request() {
  engine::GenerationRequest r;
  r.request_id = "cmpl-1";
  r.prompt_tokens = {1, 15043, 2787};
  r.max_tokens = 33;
  r.sampling.seed = 7;
  r.sampling.temperature = 0.5f;
  r.stop_strings = {"\n\n"};
  r.resumed_tokens = 1;
  return r;
}

TEST(ClusterMessagesTest, SubmitJobAndTaskRoundTrip) {
  const SubmitJob job{JobRef{"gw-1", 42}, "127.0.0.1:9000", sample_request()};
  Result<SubmitJob> j = decode_submit_job(through_link(encode(job), "submit_job"));
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->ref, job.ref);
  EXPECT_EQ(j->reply_to, job.reply_to);
  EXPECT_EQ(j->request, job.request);
  EXPECT_EQ(j->attempt, 0);
  // A job re-submitted after its JE died: its attempt travels (absent when 0).
  SubmitJob again = job;
  again.attempt = 3;
  again.request.resumed_tokens = 2;
  EXPECT_FALSE(encode(job).body.contains("attempt"));
  Result<SubmitJob> a = decode_submit_job(through_link(encode(again), "submit_job"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->attempt, 3);
  EXPECT_EQ(a->request.resumed_tokens, 2);

  const SubmitTask task{JobRef{"gw-1", 42}, 2, "127.0.0.1:9000", sample_request()};
  Result<SubmitTask> t = decode_submit_task(through_link(encode(task), "submit_task"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->attempt, 2);
  EXPECT_EQ(t->request, task.request);
  EXPECT_TRUE(t->peer.address.empty());
}

// Tier T3: the peer hint inside submit_task, and the TE → TE fetch call.
TEST(ClusterMessagesTest, PeerHintAndKvFetchRoundTrip) {
  SubmitTask task{JobRef{"gw-1", 43}, 0, "127.0.0.1:9000", sample_request()};
  task.peer = PeerHint{"te-1", "127.0.0.1:7001", 1, 5};
  Result<SubmitTask> t = decode_submit_task(through_link(encode(task), "submit_task_peer"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->peer, task.peer);

  KvFetchRequest fetch;
  fetch.kv_identity = {0xfedcba9876543210ULL, 0x0123456789abcdefULL};
  fetch.parent_hash = {~uint64_t{0}, 1};
  fetch.block_hashes = {{1, 2}, {~uint64_t{0} - 5, 3}};
  fetch.reply_to = "127.0.0.1:7002";
  Result<KvFetchRequest> f = decode_kv_fetch(through_link(encode(fetch), "kv_fetch"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, fetch);
  fetch.block_hashes.clear();
  fetch.probe_blocks = 2;
  f = decode_kv_fetch(through_link(encode(fetch), "kv_fetch_probe"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, fetch);
}

TEST(ClusterMessagesTest, MalformedPeerHintAndKvFetchAreRejected) {
  Json body = encode(SubmitTask{JobRef{"gw", 1}, 0, "a:1", sample_request()}).body;
  body["peer"] = Json{{"address", "b:2"}, {"skip_blocks", 3}, {"num_blocks", 3}};
  Result<SubmitTask> t = decode_submit_task(body);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("num_blocks"), std::string::npos) << t.status().message();
  body["peer"] = Json{{"address", ""}, {"num_blocks", 3}};
  EXPECT_FALSE(decode_submit_task(body).ok());

  EXPECT_FALSE(decode_kv_fetch(Json{{"kv_identity", Json::array({1})}}).ok());
  EXPECT_FALSE(decode_kv_fetch(Json{{"kv_identity", Json::array({1, 2})},
                                    {"parent_hash", Json::array({0, 0})},
                                    {"block_hashes", Json::array({Json::array({1, -2})})}})
                   .ok());
  const Result<KvFetchRequest> probe = decode_kv_fetch(Json{{"kv_identity", Json::array({1, 2})},
                                                            {"parent_hash", Json::array({0, 0})},
                                                            {"probe_blocks", 1000}});
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.status().message().find("probe_blocks"), std::string::npos);
}

TEST(ClusterMessagesTest, EventsReportsAndControlRoundTrip) {
  TaskEvent ev;
  ev.job = 9;
  ev.attempt = 1;
  ev.first_index = 17;
  ev.event.tokens = {5, 6};
  ev.event.finish = engine::FinishReason::kLength;
  Result<TaskEvent> e = decode_task_event(through_link(encode(ev), "task_event"));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->first_index, 17);
  EXPECT_EQ(e->event, ev.event);

  LoadReport report;
  report.te_id = "te-3";
  report.kv_fetch = "127.0.0.1:7003";
  report.role = TeRole::kDecode;
  report.model = "m";
  report.pid = 1234;
  report.load = TeLoad{1, 2, 300, 4, 50};
  report.max_model_len = 512;
  report.stats.steps_total = 99;
  report.progress.push_back(TaskProgress{JobRef{"gw-1", 42}, 0, {7, 8, 9}, true});
  Result<LoadReport> r = decode_load_report(through_link(encode(report), "load_report"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->role, TeRole::kDecode);
  EXPECT_EQ(r->pid, 1234);
  EXPECT_EQ(r->kv_fetch, report.kv_fetch);
  EXPECT_EQ(r->load, report.load);
  EXPECT_EQ(r->stats, report.stats);
  EXPECT_EQ(r->progress, report.progress);
  EXPECT_FALSE(r->semi_pd);
  report.role = TeRole::kColocated;
  report.semi_pd = true;  // a semi-PD TE
  r = decode_load_report(through_link(encode(report), "load_report"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->semi_pd);
  EXPECT_EQ(r->pp_stages, 1);
  report.semi_pd = false;
  report.pp_stages = 2;  // a pipelined TE
  r = decode_load_report(through_link(encode(report), "load_report"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pp_stages, 2);

  Result<AbortTask> a =
      decode_abort(through_link(encode_abort_task(AbortTask{JobRef{"g", 1}, 3}), "abort_task"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->attempt, 3);
  // KV kept across tool calls: the release travels as an abort's body under its own type.
  a = decode_abort(
      through_link(encode_release_kv_job(AbortTask{JobRef{"g", 4}, 0}), "release_kv_job"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ref, (JobRef{"g", 4}));
  a = decode_abort(
      through_link(encode_release_kv_task(AbortTask{JobRef{"g", 4}, 2}), "release_kv_task"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->attempt, 2);
  Result<JobAttempt> at = decode_job_attempt(through_link(encode(JobAttempt{5, 2}), "job_attempt"));
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->attempt, 2);
  Result<JobFailed> f = decode_job_failed(through_link(encode(JobFailed{5, "boom"}), "job_failed"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->error, "boom");
}

TEST(ClusterMessagesTest, RemoveTeRoundTripAndRejects) {
  Result<RemoveTe> r =
      decode_remove_te(through_link(encode(RemoveTe{"127.0.0.1:4242"}), "remove_te"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->address, "127.0.0.1:4242");
  EXPECT_FALSE(r->forget);
  r = decode_remove_te(through_link(encode(RemoveTe{"127.0.0.1:4243", true}), "remove_te"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, (RemoveTe{"127.0.0.1:4243", true}));
  EXPECT_FALSE(decode_remove_te(Json{{"address", "a:1"}})->forget);  // an older manager's
  EXPECT_EQ(decode_remove_te(Json{{"address", "a:1"}, {"forget", "yes"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(encode(RemoveTe{"a:1"}).type, msg::kRemoveTe);
  EXPECT_EQ(decode_remove_te(Json::object()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_remove_te(Json{{"address", 7}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_remove_te(Json{{"address", ""}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_remove_te(Json::array()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterMessagesTest, FleetStatusRoundTrip) {
  FleetStatus s;
  s.je_id = "je-1";
  s.fleet.tes.push_back(TeInfo{"te-0", "127.0.0.1:1", TeRole::kColocated, "m", 77, {}, true});
  s.fleet.tes.push_back(s.fleet.tes[0]);
  s.fleet.tes[1].id = "te-1";
  s.fleet.tes[1].semi_pd = true;
  s.fleet.tes[1].pp_stages = 2;
  s.stats.resize(2);
  s.metrics.resize(2);
  s.jobs_redriven = 3;
  s.max_model_len = 256;
  s.router = Json{{"locality", 4}};
  Result<FleetStatus> back =
      decode_fleet_status(through_link(net::Message{"reply", encode_body(s)}, "fleet_status"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->fleet.tes, s.fleet.tes);
  EXPECT_EQ(back->jobs_redriven, 3);
  EXPECT_EQ(back->max_model_len, 256);
  EXPECT_EQ(back->router["locality"], 4);
}

TEST(ClusterMessagesTest, MalformedBodiesNameTheField) {
  Result<SubmitJob> no_request = decode_submit_job(Json{{"ref", {{"gateway", "g"}, {"job", 1}}}});
  ASSERT_FALSE(no_request.ok());
  EXPECT_NE(no_request.status().message().find("request"), std::string::npos);
  Result<TaskEvent> bad_index =
      decode_task_event(Json{{"job", 1}, {"first_index", -4}, {"event", Json::binary({})}});
  ASSERT_FALSE(bad_index.ok());
  EXPECT_NE(bad_index.status().message().find("first_index"), std::string::npos);
  Result<LoadReport> bad_role = decode_load_report(Json{{"role", "semi"}});
  ASSERT_FALSE(bad_role.ok());
  EXPECT_NE(bad_role.status().message().find("role"), std::string::npos);
  EXPECT_FALSE(net::decode_message(std::vector<uint8_t>{0xc1}).ok());
  std::vector<uint8_t> wrong_version =
      Json::to_msgpack(Json{{"v", 99}, {"type", "x"}, {"body", Json::object()}});
  EXPECT_FALSE(net::decode_message(wrong_version).ok());
}

TEST(ClusterMessagesTest, StatusSurvivesAReply) {
  const Status s = Status::resource_exhausted("queue full");
  const Status back = decode_status_body(status_body(s));
  EXPECT_EQ(back.code(), s.code());
  EXPECT_EQ(back.message(), "queue full");
  EXPECT_TRUE(decode_status_body(status_body(Status())).ok());
  EXPECT_EQ(decode_status_body(Json::object()).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace keel::cluster
