// wait_for_bind / choose_model_source / warm_up_token (see te_warm.h).
#include "executors/te_warm.h"

#include <unistd.h>

#include <future>

#include "cluster/weights/weights_fork.h"

#include "core/file_system.h"
#include "core/log.h"

namespace keel::executors {
namespace {

// Resolves a promise with the request's first token event (or its error).
class FirstTokenSink final : public engine::OutputSink {
 public:
  void on_event(engine::TokenEvent event) override {
    if (done_) return;
    if (!event.tokens.empty()) {
      done_ = true;
      promise_.set_value(Status());
    } else if (event.finish) {
      done_ = true;
      promise_.set_value(Status::internal("warm-up request ended without a token: " + event.error));
    }
  }
  std::future<Status> future() { return promise_.get_future(); }

 private:
  bool done_ = false;  // the engine calls the sink in order, from one thread
  std::promise<Status> promise_;
};

}  // namespace

std::optional<cluster::BindModel> wait_for_bind(cluster::BindListener& binder,
                                                const sigset_t& stop_signals) {
  const struct timespec zero = {0, 0};
  while (true) {
    if (std::optional<cluster::BindModel> b = binder.wait(std::chrono::milliseconds(20))) return b;
    if (sigtimedwait(&stop_signals, nullptr, &zero) > 0) return std::nullopt;
  }
}

store::ModelSource choose_model_source(const std::string& store_dir, const std::string& model_path,
                                       const std::string& store_entry, std::string_view isa) {
  if (store_dir.empty()) {
    store::ModelSource file;
    file.path = model_path;
    file.store_error = Status::not_found("no model store (--store-dir)");
    return file;
  }
  PosixFileSystem fs;
  const store::ModelStore store({store_dir, 0}, &fs);
  std::optional<store::StoreKey> key;
  if (!store_entry.empty()) key = store::parse_entry_name(store_entry);
  store::ModelSource src = store.choose_source(model_path, key, isa);
  if (!src.from_store) {
    KEEL_LOG_INFO("te: loading {} from the file: {}", model_path, src.store_error.message());
  }
  return src;
}

ForkOutcome fork_for_bind(const cluster::BindModel& bind, cluster::WeightsReceiver* receiver) {
  ForkOutcome out;
  if (bind.fork_from.empty() || bind.store_entry.empty()) return out;
  if (receiver == nullptr) {
    out.error = "cannot fork: this TE has no model store (--store-dir)";
    KEEL_LOG_WARN("te: {}", out.error);
    return out;
  }
  const std::string path = receiver->store_dir() + "/" + bind.store_entry;
  if (::access(path.c_str(), F_OK) == 0) return out;  // already here: map it
  Result<cluster::ForkResult> r =
      cluster::fork_entry(bind.fork_from, bind.store_entry, receiver, std::chrono::minutes(5));
  if (!r.ok()) {
    out.error = r.status().to_string();
    KEEL_LOG_WARN("te: fork failed, loading the file instead: {}", out.error);
    return out;
  }
  out.forked = true;
  out.bytes = r->bytes;
  out.seconds = r->seconds;
  KEEL_LOG_INFO("te: forked {} ({} bytes) from {} in {:.3f} s", bind.store_entry, r->bytes,
                bind.fork_from, r->seconds);
  return out;
}

Status warm_up_token(engine::EngineClient* client, int32_t token) {
  engine::GenerationRequest req;
  req.request_id = "warm-up";
  req.prompt_tokens = {token};
  req.max_tokens = 1;
  req.ignore_eos = true;
  auto sink = std::make_shared<FirstTokenSink>();
  std::future<Status> done = sink->future();
  KEEL_ASSIGN_OR_RETURN(engine::RequestKey key, client->submit(std::move(req), sink));
  (void)key;
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    return Status::unavailable("warm-up token: no token within 60 s");
  }
  return done.get();
}

}  // namespace keel::executors
