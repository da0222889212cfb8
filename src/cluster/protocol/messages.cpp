// The cluster messages' encoders and total decoders (see messages.h). Engine types go through
// engine/wire.h as binary fields; the rest through FieldReader's typed, range-checked reads.
#include "cluster/protocol/messages.h"

#include <utility>

#include "engine/wire.h"
#include "engine/wire_json.h"

namespace keel::cluster {
namespace {

using engine::wire::detail::FieldReader;

Json binary(std::vector<uint8_t> bytes) { return Json::binary(std::move(bytes)); }

// The bytes of binary field `key`; nullptr (and an error in r) when missing or not binary.
const std::vector<uint8_t>* binary_field(FieldReader& r, const Json& body, const char* key) {
  if (!r.ok()) return nullptr;
  const auto it = body.find(key);
  if (it == body.end() || !it->is_binary()) {
    r.fail(key, "expected binary engine message");
    return nullptr;
  }
  return &it->get_binary();
}

template <typename T, typename Decode>
void engine_field(FieldReader& r, const Json& body, const char* key, Decode decode, T* out) {
  const std::vector<uint8_t>* bytes = binary_field(r, body, key);
  if (bytes == nullptr) return;
  Result<T> value = decode(std::span<const uint8_t>(*bytes));
  if (!value.ok()) return r.fail(key, value.status().message());
  *out = std::move(*value);
}

Json ref_json(const JobRef& ref) { return Json{{"gateway", ref.gateway}, {"job", ref.job}}; }

void read_ref(FieldReader& r, const Json& body, JobRef* out) {
  const Json* ref = r.object("ref");
  if (ref == nullptr) {
    if (r.ok()) r.fail("ref", "missing");
    return;
  }
  FieldReader rr(*ref, r.where() + ".ref");
  rr.str("gateway", &out->gateway);
  rr.i64("job", &out->job);
  if (!rr.ok()) r.fail("ref", rr.status().message());
  (void)body;
}

template <typename T>
Result<T> finish(FieldReader& r, T value) {
  if (!r.ok()) return r.status();
  return value;
}

Json load_json(const TeLoad& l) {
  return Json{{"num_waiting", l.num_waiting},
              {"num_running", l.num_running},
              {"pending_tokens", l.pending_tokens},
              {"kv_blocks_used", l.kv_blocks_used},
              {"kv_blocks_total", l.kv_blocks_total}};
}

void read_load(FieldReader& r, TeLoad* out) {
  const Json* load = r.object("load");
  if (load == nullptr) return;
  FieldReader lr(*load, r.where() + ".load");
  lr.i32("num_waiting", &out->num_waiting, 0);
  lr.i32("num_running", &out->num_running, 0);
  lr.i64("pending_tokens", &out->pending_tokens, 0);
  lr.i64("kv_blocks_used", &out->kv_blocks_used, 0);
  lr.i64("kv_blocks_total", &out->kv_blocks_total, 0);
  if (!lr.ok()) r.fail("load", lr.status().message());
}

void read_role(FieldReader& r, TeRole* out) {
  std::string role = "colocated";
  r.str("role", &role);
  if (!r.ok()) return;
  const auto parsed = parse_te_role(role);
  if (!parsed) return r.fail("role", "unknown role \"" + role + "\"");
  *out = *parsed;
}

Json hash_json(const kv::BlockHash& h) { return Json::array({h.lo, h.hi}); }

// A non-negative integer as u64 (msgpack gives unsigned; JSON built in memory may be signed).
bool read_u64(const Json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (!j.is_number_integer() || j.get<int64_t>() < 0) return false;
  *out = static_cast<uint64_t>(j.get<int64_t>());
  return true;
}

// A [lo, hi] pair of unsigned integers.
bool read_hash(const Json& j, kv::BlockHash* out) {
  return j.is_array() && j.size() == 2 && read_u64(j[0], &out->lo) && read_u64(j[1], &out->hi);
}

void hash_field(FieldReader& r, const Json& body, const char* key, kv::BlockHash* out) {
  if (!r.ok()) return;
  const auto it = body.find(key);
  if (it == body.end() || !read_hash(*it, out)) r.fail(key, "expected [lo, hi] unsigned pair");
}

void read_peer_hint(FieldReader& r, PeerHint* out) {
  const Json* peer = r.object("peer");
  if (peer == nullptr) return;
  FieldReader pr(*peer, r.where() + ".peer");
  pr.str("te_id", &out->te_id);
  pr.str("address", &out->address);
  pr.i32("skip_blocks", &out->skip_blocks, 0);
  pr.i32("num_blocks", &out->num_blocks, 0);
  if (pr.ok() && out->num_blocks <= out->skip_blocks) {
    pr.fail("num_blocks", "must exceed skip_blocks");
  }
  if (pr.ok() && out->address.empty()) pr.fail("address", "empty");
  if (!pr.ok()) r.fail("peer", pr.status().message());
}

}  // namespace

net::Message encode(const SubmitJob& m) {
  Json body{{"ref", ref_json(m.ref)},
            {"reply_to", m.reply_to},
            {"request", binary(engine::wire::encode(m.request))}};
  if (m.attempt > 0) body["attempt"] = m.attempt;
  return {std::string(msg::kSubmitJob), std::move(body)};
}

net::Message encode(const SubmitTask& m) {
  Json body{{"ref", ref_json(m.ref)},         {"attempt", m.attempt},
            {"reply_to", m.reply_to},         {"request", binary(engine::wire::encode(m.request))},
            {"prefill_only", m.prefill_only}, {"transfer_to", m.transfer_to}};
  if (!m.peer.address.empty()) {
    body["peer"] = Json{{"te_id", m.peer.te_id},
                        {"address", m.peer.address},
                        {"skip_blocks", m.peer.skip_blocks},
                        {"num_blocks", m.peer.num_blocks}};
  }
  return {std::string(msg::kSubmitTask), std::move(body)};
}

net::Message encode(const KvFetchRequest& m) {
  Json hashes = Json::array();
  for (const kv::BlockHash& h : m.block_hashes) hashes.push_back(hash_json(h));
  return {std::string(msg::kKvFetch), Json{{"kv_identity", hash_json(m.kv_identity)},
                                           {"parent_hash", hash_json(m.parent_hash)},
                                           {"block_hashes", std::move(hashes)},
                                           {"reply_to", m.reply_to},
                                           {"probe_blocks", m.probe_blocks}}};
}

net::Message encode_abort_job(const AbortTask& m) {
  return {std::string(msg::kAbortJob), Json{{"ref", ref_json(m.ref)}, {"attempt", m.attempt}}};
}

net::Message encode_abort_task(const AbortTask& m) {
  return {std::string(msg::kAbortTask), Json{{"ref", ref_json(m.ref)}, {"attempt", m.attempt}}};
}

net::Message encode_release_kv_job(const AbortTask& m) {
  return {std::string(msg::kReleaseKvJob), Json{{"ref", ref_json(m.ref)}, {"attempt", m.attempt}}};
}

net::Message encode_release_kv_task(const AbortTask& m) {
  return {std::string(msg::kReleaseKvTask), Json{{"ref", ref_json(m.ref)}, {"attempt", m.attempt}}};
}

net::Message encode(const TaskEvent& m) {
  return {std::string(msg::kTaskEvent),
          Json{{"job", m.job},
               {"attempt", m.attempt},
               {"first_index", m.first_index},
               {"event", binary(engine::wire::encode(engine::wire::EventFrame{m.job, m.event}))}}};
}

net::Message encode(const LoadReport& m) {
  Json progress = Json::array();
  for (const TaskProgress& p : m.progress) {
    progress.push_back(Json{{"ref", ref_json(p.ref)},
                            {"attempt", p.attempt},
                            {"tokens", p.tokens},
                            {"finished", p.finished},
                            {"ended_job", p.ended_job},
                            {"kv_link_blocked", p.kv_link_blocked}});
  }
  return {std::string(msg::kLoadReport), Json{{"te_id", m.te_id},
                                              {"role", std::string(te_role_name(m.role))},
                                              {"model", m.model},
                                              {"pid", m.pid},
                                              {"kv_events", m.kv_events},
                                              {"kv_events_replay", m.kv_events_replay},
                                              {"kv_transfer", m.kv_transfer},
                                              {"kv_fetch", m.kv_fetch},
                                              {"semi_pd", m.semi_pd},
                                              {"pp_stages", m.pp_stages},
                                              {"load", load_json(m.load)},
                                              {"max_model_len", m.max_model_len},
                                              {"max_waiting", m.max_waiting},
                                              {"stats", binary(engine::wire::encode(m.stats))},
                                              {"metrics", binary(engine::wire::encode(m.metrics))},
                                              {"progress", std::move(progress)}}};
}

net::Message encode(const JobAttempt& m) {
  return {std::string(msg::kJobAttempt), Json{{"job", m.job}, {"attempt", m.attempt}}};
}

net::Message encode(const JobFailed& m) {
  return {std::string(msg::kJobFailed), Json{{"job", m.job}, {"error", m.error}}};
}

net::Message encode(const RemoveTe& m) {
  return {std::string(msg::kRemoveTe), Json{{"address", m.address}, {"forget", m.forget}}};
}

Json encode_body(const FleetStatus& m) {
  Json tes = Json::array();
  for (size_t i = 0; i < m.fleet.tes.size(); ++i) {
    const TeInfo& te = m.fleet.tes[i];
    Json entry{{"id", te.id},
               {"address", te.address},
               {"role", std::string(te_role_name(te.role))},
               {"model", te.model},
               {"pid", te.pid},
               {"healthy", te.healthy},
               {"state", std::string(health::te_state_name(te.state))},
               {"semi_pd", te.semi_pd},
               {"pp_stages", te.pp_stages},
               {"load", load_json(te.load)}};
    if (i < m.stats.size()) entry["stats"] = binary(engine::wire::encode(m.stats[i]));
    if (i < m.metrics.size()) entry["metrics"] = binary(engine::wire::encode(m.metrics[i]));
    tes.push_back(std::move(entry));
  }
  return Json{{"je_id", m.je_id},
              {"tes", std::move(tes)},
              {"jobs_active", m.jobs_active},
              {"jobs_total", m.jobs_total},
              {"jobs_redriven", m.jobs_redriven},
              {"jobs_failed", m.jobs_failed},
              {"jobs_resubmitted", m.jobs_resubmitted},
              {"max_model_len", m.max_model_len},
              {"max_waiting", m.max_waiting},
              {"router", m.router.is_object() ? m.router : Json::object()},
              {"predictor", m.predictor.is_object() ? m.predictor : Json::object()}};
}

Result<SubmitJob> decode_submit_job(const Json& body) {
  FieldReader r(body, "submit_job");
  SubmitJob m;
  read_ref(r, body, &m.ref);
  r.str("reply_to", &m.reply_to);
  engine_field(r, body, "request", engine::wire::decode_request, &m.request);
  if (r.has("attempt")) r.i32("attempt", &m.attempt, 0);
  return finish(r, std::move(m));
}

Result<SubmitTask> decode_submit_task(const Json& body) {
  FieldReader r(body, "submit_task");
  SubmitTask m;
  read_ref(r, body, &m.ref);
  r.i32("attempt", &m.attempt, 0);
  r.str("reply_to", &m.reply_to);
  engine_field(r, body, "request", engine::wire::decode_request, &m.request);
  r.boolean("prefill_only", &m.prefill_only);
  r.str("transfer_to", &m.transfer_to);
  if (r.has("peer")) read_peer_hint(r, &m.peer);
  return finish(r, std::move(m));
}

Result<KvFetchRequest> decode_kv_fetch(const Json& body) {
  FieldReader r(body, "kv_fetch");
  KvFetchRequest m;
  hash_field(r, body, "kv_identity", &m.kv_identity);
  hash_field(r, body, "parent_hash", &m.parent_hash);
  if (const Json* hashes = r.array("block_hashes")) {
    for (const Json& h : *hashes) {
      kv::BlockHash hash;
      if (!read_hash(h, &hash)) {
        r.fail("block_hashes", "expected [lo, hi] unsigned pairs");
        break;
      }
      m.block_hashes.push_back(hash);
    }
  }
  r.str("reply_to", &m.reply_to);
  r.i32("probe_blocks", &m.probe_blocks, 0, 64);
  return finish(r, std::move(m));
}

Result<AbortTask> decode_abort(const Json& body) {
  FieldReader r(body, "abort");
  AbortTask m;
  read_ref(r, body, &m.ref);
  r.i32("attempt", &m.attempt, 0);
  return finish(r, std::move(m));
}

Result<TaskEvent> decode_task_event(const Json& body) {
  FieldReader r(body, "task_event");
  TaskEvent m;
  r.i64("job", &m.job);
  r.i32("attempt", &m.attempt, 0);
  r.i32("first_index", &m.first_index, 0);
  engine::wire::EventFrame frame;
  engine_field(r, body, "event", engine::wire::decode_event, &frame);
  m.event = std::move(frame.event);
  return finish(r, std::move(m));
}

Result<LoadReport> decode_load_report(const Json& body) {
  FieldReader r(body, "load_report");
  LoadReport m;
  r.str("te_id", &m.te_id);
  read_role(r, &m.role);
  r.str("model", &m.model);
  r.i64("pid", &m.pid, 0);
  r.str("kv_events", &m.kv_events);
  r.str("kv_events_replay", &m.kv_events_replay);
  r.str("kv_transfer", &m.kv_transfer);
  if (r.has("kv_fetch")) r.str("kv_fetch", &m.kv_fetch);
  if (r.has("semi_pd")) r.boolean("semi_pd", &m.semi_pd);
  if (r.has("pp_stages")) r.i32("pp_stages", &m.pp_stages, 1);
  read_load(r, &m.load);
  r.i64("max_model_len", &m.max_model_len, 0);
  r.i64("max_waiting", &m.max_waiting, 0);
  engine_field(r, body, "stats", engine::wire::decode_stats, &m.stats);
  engine_field(r, body, "metrics", engine::wire::decode_metrics, &m.metrics);
  if (const Json* progress = r.array("progress")) {
    for (const Json& p : *progress) {
      FieldReader pr(p, "load_report.progress[]");
      TaskProgress tp;
      read_ref(pr, p, &tp.ref);
      pr.i32("attempt", &tp.attempt, 0);
      pr.i32_list("tokens", &tp.tokens);
      pr.boolean("finished", &tp.finished);
      pr.boolean("ended_job", &tp.ended_job);
      if (pr.has("kv_link_blocked")) pr.boolean("kv_link_blocked", &tp.kv_link_blocked);
      if (!pr.ok()) return pr.status();
      m.progress.push_back(std::move(tp));
    }
  }
  return finish(r, std::move(m));
}

Result<JobAttempt> decode_job_attempt(const Json& body) {
  FieldReader r(body, "job_attempt");
  JobAttempt m;
  r.i64("job", &m.job);
  r.i32("attempt", &m.attempt, 0);
  return finish(r, m);
}

Result<JobFailed> decode_job_failed(const Json& body) {
  FieldReader r(body, "job_failed");
  JobFailed m;
  r.i64("job", &m.job);
  r.str("error", &m.error);
  return finish(r, std::move(m));
}

Result<RemoveTe> decode_remove_te(const Json& body) {
  FieldReader r(body, "remove_te");
  RemoveTe m;
  r.str("address", &m.address);
  if (r.has("forget")) r.boolean("forget", &m.forget);
  if (r.ok() && m.address.empty()) r.fail("address", "empty");
  return finish(r, std::move(m));
}

Result<FleetStatus> decode_fleet_status(const Json& body) {
  FieldReader r(body, "fleet");
  FleetStatus m;
  r.str("je_id", &m.je_id);
  r.i64("jobs_active", &m.jobs_active, 0);
  r.i64("jobs_total", &m.jobs_total, 0);
  r.i64("jobs_redriven", &m.jobs_redriven, 0);
  r.i64("jobs_failed", &m.jobs_failed, 0);
  if (r.has("jobs_resubmitted")) r.i64("jobs_resubmitted", &m.jobs_resubmitted, 0);
  r.i64("max_model_len", &m.max_model_len, 0);
  r.i64("max_waiting", &m.max_waiting, 0);
  if (const Json* router = r.object("router")) m.router = *router;
  if (const Json* predictor = r.object("predictor")) m.predictor = *predictor;
  if (const Json* tes = r.array("tes")) {
    for (const Json& t : *tes) {
      FieldReader tr(t, "fleet.tes[]");
      TeInfo te;
      tr.str("id", &te.id);
      tr.str("address", &te.address);
      read_role(tr, &te.role);
      tr.str("model", &te.model);
      tr.i64("pid", &te.pid, 0);
      tr.boolean("healthy", &te.healthy);
      if (tr.has("semi_pd")) tr.boolean("semi_pd", &te.semi_pd);
      if (tr.has("pp_stages")) tr.i32("pp_stages", &te.pp_stages, 1);
      if (tr.has("state")) {
        std::string state;
        tr.str("state", &state);
        const auto parsed = health::parse_te_state(state);
        if (!parsed)
          return Status::invalid_argument("fleet.tes[].state: unknown \"" + state + "\"");
        te.state = *parsed;
      }
      read_load(tr, &te.load);
      engine::EngineStats stats;
      engine::MetricsSnapshot metrics;
      if (tr.has("stats")) engine_field(tr, t, "stats", engine::wire::decode_stats, &stats);
      if (tr.has("metrics")) {
        engine_field(tr, t, "metrics", engine::wire::decode_metrics, &metrics);
      }
      if (!tr.ok()) return tr.status();
      m.fleet.tes.push_back(std::move(te));
      m.stats.push_back(std::move(stats));
      m.metrics.push_back(std::move(metrics));
    }
  }
  return finish(r, std::move(m));
}

Json status_body(const Status& status) {
  return Json{{"status", binary(engine::wire::encode(status))}};
}

Status decode_status_body(const Json& body) {
  const auto it = body.find("status");
  if (it == body.end() || !it->is_binary()) {
    return Status::internal("malformed reply: no status");
  }
  Status carried;
  const Status s =
      engine::wire::decode_status(std::span<const uint8_t>(it->get_binary()), &carried);
  if (!s.ok()) return Status::internal("malformed reply: " + s.message());
  return carried;
}

}  // namespace keel::cluster
