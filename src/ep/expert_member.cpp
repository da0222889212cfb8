// serve_expert_member: hello check, then work frames through MoeFfn::run_slots.
#include "ep/expert_member.h"

#include <memory>
#include <utility>
#include <vector>

#include "core/log.h"
#include "model/moe_ffn.h"

namespace keel::ep {
namespace {

using Clock = std::chrono::steady_clock;

// One member's state across frames.
class Member {
 public:
  Member(const model::Model& model, ExpertChannel& ch, kernels::Ops& ops,
         std::function<Result<const model::Model*>(const model::ExpertShard&)> reload)
      : model_(&model),
        shard_(model.expert_shard()),
        ch_(ch),
        ops_(ops),
        reload_(std::move(reload)) {}

  // Answers one request frame; true when it was kBye.
  bool answer() {
    auto frame = decode_frame(ch_.request());
    if (!frame.ok()) return reply_error(frame.error(), 0), false;
    switch (frame->kind) {
      case FrameKind::kBye:
        return true;
      case FrameKind::kHello:
        hello(*frame);
        return false;
      case FrameKind::kWork:
        work(*frame);
        return false;
      default:
        reply_error(Status::corrupt("expert member: unexpected frame kind " +
                                    std::to_string(static_cast<int>(frame->kind))),
                    frame->seq);
        return false;
    }
  }

 private:
  void hello(const Frame& f) {
    auto h = decode_hello(f);
    if (!h.ok()) return reply_error(h.error(), f.seq);
    if (model_ == nullptr) {  // an earlier reload failed: try again
      const Status reloaded = reload(shard_, h->replicas);
      if (!reloaded.ok()) return reply_error(reloaded, f.seq);
    }
    const model::ExpertShard s = model_->expert_shard();
    EpHello mine = hello_for(*model_, s.index, s.count, h->max_rows);
    mine.replicas = h->replicas;  // compared below
    if (!(*h == mine) || h->max_rows < 1) {
      return reply_error(Status::invalid_argument(
                             "expert member: the leader's model or shard (shard " +
                             std::to_string(h->shard_index) + "/" + std::to_string(h->shard_count) +
                             ") differs from this member's (" + std::to_string(s.index) + "/" +
                             std::to_string(s.count) + ")"),
                         f.seq);
    }
    if (h->replicas != s.replicas) {
      const Status reloaded = reload(s, h->replicas);
      if (!reloaded.ok()) return reply_error(reloaded, f.seq);
    }
    if (h->max_rows > max_rows_) {  // a later leader may batch more; never less than before
      const int64_t k = model_->hparams().moe.n_expert_used, d = model_->hparams().n_embd;
      const Status room = ch_.reserve(work_frame_bytes(h->max_rows, h->max_rows * k, d),
                                      outputs_frame_bytes(h->max_rows * k, d));
      if (!room.ok()) return reply_error(room, f.seq);
      moe_ = std::make_unique<model::MoeFfn>(model_->hparams(), h->max_rows);
      max_rows_ = h->max_rows;
    }
    (void)encode_bare(FrameKind::kReady, f.seq, ch_.reply());
    ch_.post_reply();
  }

  // Loads this member's range again with `replicas` beside it.
  Status reload(const model::ExpertShard& current,
                const std::vector<std::pair<int32_t, int32_t>>& replicas) {
    if (!reload_) {
      return Status::unsupported(
          "expert member: the leader asks for replicated experts, and "
          "this member cannot load them");
    }
    model::ExpertShard next{current.index, current.count, current.experts_only, replicas};
    const model::HParams& hp = model_->hparams();
    KEEL_TRY(next.validate().with_prefix("expert member"));
    for (const auto& [layer, expert] : replicas) {
      if (layer >= hp.n_layer || expert >= hp.moe.n_expert) {
        return Status::invalid_argument("expert member: replica (layer " + std::to_string(layer) +
                                        ", expert " + std::to_string(expert) +
                                        ") is not in the model");
      }
    }
    KEEL_LOG_INFO("expert member: loading shard {}/{} with {} replicated experts", next.index,
                  next.count, replicas.size());
    model_ = nullptr;  // the reload may free the current model first
    auto loaded = reload_(next);
    if (!loaded.ok()) return loaded.error().with_prefix("expert member: reload");
    model_ = *loaded;
    shard_ = model_->expert_shard();
    return Status();
  }

  void work(const Frame& f) {
    if (!moe_ || model_ == nullptr) {
      return reply_error(Status::failed_precondition("expert member: work before hello"), f.seq);
    }
    auto w = decode_work(f);
    if (!w.ok()) return reply_error(w.error(), f.seq);
    const model::HParams& hp = model_->hparams();
    const int64_t k = hp.moe.n_expert_used;
    if (w->layer >= hp.n_layer || w->n_embd != hp.n_embd || w->n_rows > max_rows_ ||
        w->n_slots > max_rows_ * k) {
      return reply_error(Status::invalid_argument("expert member: work frame out of bounds"),
                         f.seq);
    }
    for (int32_t i = 0; i < w->n_slots; ++i) {
      const int32_t e = w->slot_expert[i];
      if (e < 0 || e >= hp.moe.n_expert ||
          !model_->expert_shard().holds(w->layer, e, hp.moe.n_expert)) {
        return reply_error(Status::invalid_argument("expert member: expert " + std::to_string(e) +
                                                    " is not held here"),
                           f.seq);
      }
    }
    const auto t0 = Clock::now();
    auto size = encode_outputs(w->n_slots, w->n_embd, 0, f.seq, ch_.reply());
    if (!size.ok()) return reply_error(size.error(), f.seq);
    moe_->run_slots(model_->weights().layers[static_cast<size_t>(w->layer)].moe, w->rows,
                    w->n_slots, w->slot_row, w->slot_expert, ops_, outputs_area(ch_.reply()));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0);
    (void)encode_outputs(w->n_slots, w->n_embd, static_cast<uint64_t>(ns.count()), f.seq,
                         ch_.reply());
    ch_.post_reply();
  }

  void reply_error(const Status& s, uint32_t seq) {
    KEEL_LOG_WARN("expert member: {}", s.to_string());
    (void)encode_error(s, seq, ch_.reply());
    ch_.post_reply();
  }

  const model::Model* model_;  // null while a reload failed
  model::ExpertShard shard_;   // the shard this member serves (its model's)
  ExpertChannel& ch_;
  kernels::Ops& ops_;
  std::function<Result<const model::Model*>(const model::ExpertShard&)> reload_;
  std::unique_ptr<model::MoeFfn> moe_;
  int32_t max_rows_ = 0;
};

}  // namespace

EpHello hello_for(const model::Model& model, int32_t shard_index, int32_t shard_count,
                  int32_t max_rows) {
  const model::HParams& hp = model.hparams();
  EpHello h;
  h.model_bytes = model.file().file_size();
  h.n_layer = static_cast<int32_t>(hp.n_layer);
  h.n_embd = static_cast<int32_t>(hp.n_embd);
  h.n_expert = static_cast<int32_t>(hp.moe.n_expert);
  h.n_expert_used = static_cast<int32_t>(hp.moe.n_expert_used);
  h.n_ff_exp = static_cast<int32_t>(hp.moe.n_ff_exp);
  h.shard_index = shard_index;
  h.shard_count = shard_count;
  h.max_rows = max_rows;
  return h;
}

Status serve_expert_member(const model::Model& model, ExpertChannel& channel, kernels::Ops& ops,
                           const ExpertMemberOptions& options) {
  if (!model.hparams().is_moe()) {
    return Status::invalid_argument("expert member: the model is not a mixture of experts");
  }
  Member member(model, channel, ops, options.reload);
  uint32_t seen = 0;  // a fresh channel: the leader's hello may already be waiting
  for (;;) {
    auto next = channel.wait_request(seen, options.idle_slice, {});
    if (!next.ok()) {  // an idle slice: is the leader still there?
      if (options.leader_alive && !options.leader_alive()) {
        return Status::unavailable("expert member: the leader is gone");
      }
      continue;
    }
    seen = *next;
    if (member.answer() && !options.keep_serving) return Status();
  }
}

}  // namespace keel::ep
