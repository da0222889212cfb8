// StageServer: pp_hello and pp_step over cluster links (see stage_server.h).
#include "pipeline/stage_server.h"

#include <string>

#include "cluster/protocol/messages.h"
#include "engine/model_identity.h"
#include "model/kv_type.h"
#include "pipeline/pp_step.h"

namespace keel::pipeline {

using net::Json;

Result<std::unique_ptr<StageServer>> StageServer::start(const model::Model& model,
                                                        StageServerConfig config) {
  KEEL_ASSIGN_OR_RETURN(const kv::BlockHash key, engine::model_identity(model.file()));
  std::unique_ptr<StageServer> s(new StageServer(model, std::move(config), key));
  StageServer* self = s.get();
  KEEL_ASSIGN_OR_RETURN(s->server_, net::LinkServer::start(
                                        s->config_.host, s->config_.port,
                                        [self](net::Link& link, net::Message m) {
                                          self->on_message(link, std::move(m));
                                        },
                                        [self](net::Link&) {
                                          if (self->config_.on_link_closed)
                                            self->config_.on_link_closed();
                                        }));
  return s;
}

StageServer::~StageServer() { stop(); }

uint16_t StageServer::port() const { return server_->port(); }

int64_t StageServer::num_steps() const {
  MutexLock lock(mu_);
  return num_steps_;
}

void StageServer::stop() {
  if (server_) server_->stop();
}

void StageServer::on_message(net::Link& link, net::Message m) {
  const auto call_id = m.body.find("call_id");
  if (call_id == m.body.end() || !call_id->is_number_integer()) return;
  const int64_t call = call_id->get<int64_t>();
  if (m.type == "pp_hello") {
    link.reply(call, hello(m.body));
  } else if (m.type == "pp_step") {
    link.reply(call, step(m.body));
  } else {
    link.reply(call,
               cluster::status_body(Status::invalid_argument("pp stage: unknown call " + m.type)));
  }
}

Json StageServer::hello(const Json& body) {
  StageSpec spec;
  kv::BlockHash key;
  std::string kv_type;
  try {
    key.lo = body.at("model_lo").get<uint64_t>();
    key.hi = body.at("model_hi").get<uint64_t>();
    spec.first_layer = body.at("first_layer").get<int64_t>();
    spec.num_blocks = body.at("num_blocks").get<int32_t>();
    spec.block_size = body.at("block_size").get<int32_t>();
    kv_type = body.at("kv_type").get<std::string>();
    spec.max_batch_tokens = body.at("max_batch_tokens").get<int64_t>();
  } catch (const std::exception& e) {
    return cluster::status_body(Status::invalid_argument(std::string("pp_hello: ") + e.what()));
  }
  if (!(key == model_key_)) {
    return cluster::status_body(
        Status::invalid_argument("pp_hello: stage 0 runs another model than this stage"));
  }
  Result<DType> dtype = model::parse_kv_type(kv_type);
  if (!dtype.ok()) return cluster::status_body(dtype.status());
  spec.kv_dtype = *dtype;
  Result<std::unique_ptr<StageRunner>> runner =
      StageRunner::create(model_, spec, config_.isa, config_.threads);
  if (!runner.ok()) return cluster::status_body(runner.status());
  MutexLock lock(run_mu_);
  runner_ = std::move(*runner);
  return cluster::status_body(Status());
}

Json StageServer::step(const Json& body) {
  const auto it = body.find("step");
  if (it == body.end() || !it->is_binary()) {
    return cluster::status_body(Status::invalid_argument("pp_step: no step bytes"));
  }
  Result<PpStep> step = decode_pp_step(it->get_binary());
  if (!step.ok()) return cluster::status_body(step.status());
  MutexLock lock(run_mu_);
  if (runner_ == nullptr) {
    return cluster::status_body(Status::invalid_argument("pp_step before pp_hello"));
  }
  if (Status st = runner_->run(step->block_copies, step->batch, step->residual, &logits_);
      !st.ok()) {
    return cluster::status_body(st);
  }
  {
    MutexLock l(mu_);
    ++num_steps_;
  }
  Json reply = cluster::status_body(Status());
  reply["logits"] = Json::binary(encode_floats(logits_));
  return reply;
}

}  // namespace keel::pipeline
