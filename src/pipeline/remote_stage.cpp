// RemoteStage: hello, then one call per step (see remote_stage.h).
#include "pipeline/remote_stage.h"

#include <string>

#include "cluster/protocol/messages.h"
#include "model/kv_type.h"
#include "pipeline/pp_step.h"

namespace keel::pipeline {

using net::Json;

Result<std::unique_ptr<RemoteStage>> RemoteStage::connect(const RemoteStageOptions& options,
                                                          const StageSpec& spec,
                                                          const kv::BlockHash& model_key) {
  std::unique_ptr<RemoteStage> r(new RemoteStage(options, spec));
  KEEL_ASSIGN_OR_RETURN(
      r->link_, net::Link::connect(options.address, options.connect_timeout, nullptr, nullptr));
  net::Message hello{"pp_hello", Json{{"model_lo", model_key.lo},
                                      {"model_hi", model_key.hi},
                                      {"first_layer", spec.first_layer},
                                      {"num_blocks", spec.num_blocks},
                                      {"block_size", spec.block_size},
                                      {"kv_type", std::string(model::kv_type_name(spec.kv_dtype))},
                                      {"max_batch_tokens", spec.max_batch_tokens}}};
  KEEL_ASSIGN_OR_RETURN(const Json reply,
                        r->link_->call(std::move(hello), options.connect_timeout));
  if (Status st = cluster::decode_status_body(reply); !st.ok()) {
    r->link_->close();
    return st;
  }
  return r;
}

RemoteStage::~RemoteStage() {
  if (link_) link_->close();
}

Status RemoteStage::lost(Status why) {
  if (!lost_told_ && options_.on_lost) {
    lost_told_ = true;
    options_.on_lost(why);
  }
  return why;
}

Status RemoteStage::run(const engine::PipelineStep& step, std::vector<float>* logits) {
  if (link_->closed()) {
    return lost(Status::unavailable("pipeline stage " + options_.address + " is gone"));
  }
  Result<Json> reply =
      link_->call(net::Message{"pp_step", Json{{"step", Json::binary(encode_pp_step(step))}}},
                  options_.step_timeout);
  if (!reply.ok()) {
    return lost(Status::unavailable("pipeline stage " + options_.address + ": " +
                                    reply.status().message()));
  }
  KEEL_TRY(cluster::decode_status_body(*reply));
  const auto it = reply->find("logits");
  if (it == reply->end() || !it->is_binary()) {
    return Status::internal("pipeline stage reply without logits");
  }
  KEEL_ASSIGN_OR_RETURN(*logits, decode_floats(it->get_binary()));
  return Status();
}

}  // namespace keel::pipeline
