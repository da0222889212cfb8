// The warm pool side of `keel te` (--warm): a TE that started without a model waits for its bind
// (cluster/protocol/bind_model.h) while still answering SIGTERM, chooses where its weights come
// from (the model store entry, else the file), and after its engine is built generates one warm-up
// token (the scale-out's post-load phase, and the first token it produces).
//
// Thread safety: the owner's thread.
#pragma once

#include <signal.h>

#include <optional>
#include <string>

#include "cluster/task/bind_listener.h"
#include "cluster/weights/weights_receiver.h"
#include "core/result.h"
#include "engine/engine_client.h"
#include "store/model_store.h"

namespace keel::executors {

// The bind, or nullopt when a stop signal came first.
[[nodiscard]] std::optional<cluster::BindModel> wait_for_bind(cluster::BindListener& binder,
                                                              const sigset_t& stop_signals);

// Where to load `model_path` from: `store_dir`'s entry ("" = no store; `store_entry` names it
// when the binder knows it) for `isa`, else the file. Logs why the store was not used.
[[nodiscard]] store::ModelSource choose_model_source(const std::string& store_dir,
                                                     const std::string& model_path,
                                                     const std::string& store_entry,
                                                     std::string_view isa);

// A fork's outcome (cluster::BindReply's fork fields).
struct ForkOutcome {
  bool forked = false;
  uint64_t bytes = 0;
  double seconds = 0;
  std::string error;  // "" unless a fork was tried and failed
};

// When `bind` names a peer to fork from and `receiver`'s store lacks the bind's entry: pulls it
// (cluster::fork_entry). A failed fork leaves no entry (the TE then loads the file); it is logged.
[[nodiscard]] ForkOutcome fork_for_bind(const cluster::BindModel& bind,
                                        cluster::WeightsReceiver* receiver);

// Generates one token of a one-token prompt (`token`) on `client`; returns when it came.
[[nodiscard]] Status warm_up_token(engine::EngineClient* client, int32_t token);

}  // namespace keel::executors
