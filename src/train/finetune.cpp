// finetune (finetune.h): shuffled epochs, accumulated batches, AdamW steps, validation.
#include "train/finetune.h"

#include <chrono>
#include <numeric>
#include <string>

namespace keel::train {
namespace {

// A seeded Fisher–Yates permutation of [0, n) for `epoch`.
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int32_t epoch) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  const uint64_t key = seed * 0x100000001B3ull + static_cast<uint64_t>(epoch) + 1;
  for (size_t i = n; i > 1; --i) {
    const auto j = static_cast<size_t>(uniform01(key, i) * static_cast<double>(i));
    std::swap(order[i - 1], order[std::min(j, i - 1)]);
  }
  return order;
}

}  // namespace

Status FinetuneConfig::validate() const {
  KEEL_TRY(lora.validate());
  KEEL_TRY(optimizer.validate());
  if (epochs < 1) return Status::invalid_argument("epochs must be ≥ 1");
  if (batch_size < 1) return Status::invalid_argument("the batch size must be ≥ 1");
  return Status();
}

int64_t total_steps(size_t num_examples, const FinetuneConfig& config) {
  const auto per_epoch = (static_cast<int64_t>(num_examples) + config.batch_size - 1) /
                         static_cast<int64_t>(config.batch_size);
  return per_epoch * config.epochs;
}

Result<SequenceLoss> evaluate_loss(ModelPass<float>& pass, std::span<const TrainSequence> seqs,
                                   const std::vector<float>& params) {
  SequenceLoss total;
  for (const TrainSequence& s : seqs) {
    KEEL_ASSIGN_OR_RETURN(const SequenceLoss l, pass.run(s, params.data(), nullptr));
    total.loss_sum += l.loss_sum;
    total.num_targets += l.num_targets;
    total.num_correct += l.num_correct;
  }
  return total;
}

namespace {

// One call of finetune(): the live state (params and cursor in state_, moments in adam_) and the
// loop over epochs and batches.
class Run {
 public:
  Run(const model::Model& base, std::span<const TrainSequence> train,
      std::span<const TrainSequence> valid, const FinetuneConfig& config, ThreadPool& pool,
      const FinetuneProgress& progress, const FinetuneControl& control, FinetuneResult* r)
      : train_(train),
        valid_(valid),
        config_(config),
        progress_(progress),
        control_(control),
        r_(*r),
        pass_(base, r->layout, pool, config.checkpoint_layers),
        adam_(config.optimizer, r->layout.num_params),
        total_steps_(total_steps(train.size(), config)) {
    pass_.set_gate(&gate_);
  }

  // The fresh or the resumed state.
  Status start() {
    TrainState& s = r_.state;
    if (control_.resume == nullptr) {
      s.seed = config_.seed;
      s.epochs = config_.epochs;
      s.batch_size = config_.batch_size;
      s.num_examples = static_cast<int64_t>(train_.size());
      s.params = init_lora_params<float>(r_.layout, config_.seed);
      return Status();
    }
    s = *control_.resume;
    if (s.seed != config_.seed || s.epochs != config_.epochs ||
        s.batch_size != config_.batch_size ||
        s.num_examples != static_cast<int64_t>(train_.size()) ||
        s.params.size() != r_.layout.num_params || s.epoch > s.epochs) {
      return Status::invalid_argument(
          "the saved training state is not of this run (another seed, config, data or model)");
    }
    return adam_.restore(s.adam_m, s.adam_v, s.step);
  }

  // Every remaining step; Cancelled when the stop flag ended it.
  Status go() {
    start_time_ = std::chrono::steady_clock::now();
    TrainState& s = r_.state;
    for (; s.epoch < config_.epochs; ++s.epoch) {
      const std::vector<size_t> order = epoch_order(train_.size(), config_.seed, s.epoch);
      while (s.next_example < s.num_examples) KEEL_TRY(step(order));
      KEEL_TRY(end_epoch());
      s.next_example = 0;
      s.epoch_loss_sum = 0.0;
      s.epoch_targets = 0;
    }
    return Status();
  }

  // The moments into the state (at a checkpoint and at the end).
  void snapshot_moments() {
    r_.state.adam_m = adam_.first_moment();
    r_.state.adam_v = adam_.second_moment();
  }

 private:
  // One optimizer step over the batch at the cursor; nothing changes when it is stopped.
  Status step(const std::vector<size_t>& order) {
    TrainState& s = r_.state;
    const auto b = static_cast<size_t>(s.next_example);
    const size_t e = std::min(order.size(), b + static_cast<size_t>(config_.batch_size));
    int64_t targets = 0, tokens = 0;
    for (size_t i = b; i < e; ++i) targets += train_[order[i]].num_targets();
    grads_.assign(r_.layout.num_params, 0.0f);
    SequenceLoss step_loss;
    for (size_t i = b; i < e; ++i) {
      const TrainSequence& seq = train_[order[i]];
      KEEL_ASSIGN_OR_RETURN(const SequenceLoss l,
                            pass_.run(seq, s.params.data(), grads_.data(),
                                      1.0 / static_cast<double>(std::max<int64_t>(targets, 1))));
      step_loss.loss_sum += l.loss_sum;
      step_loss.num_targets += l.num_targets;
      step_loss.num_correct += l.num_correct;
      tokens += static_cast<int64_t>(seq.tokens.size());
    }
    const OptimizerStep os = adam_.step(s.params, grads_, total_steps_);
    s.step = adam_.steps();
    s.next_example = static_cast<int64_t>(e);
    s.trained_tokens += tokens;
    s.epoch_loss_sum += step_loss.loss_sum;
    s.epoch_targets += step_loss.num_targets;
    StepReport rep;
    rep.step = s.step;
    rep.total_steps = total_steps_;
    rep.epoch = s.epoch + 1;
    const double n = static_cast<double>(std::max<int64_t>(step_loss.num_targets, 1));
    rep.loss = step_loss.loss_sum / n;
    rep.accuracy = static_cast<double>(step_loss.num_correct) / n;
    rep.learning_rate = os.learning_rate;
    rep.grad_norm = os.grad_norm;
    rep.trained_tokens = s.trained_tokens;
    rep.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
    r_.step_losses.push_back(rep.loss);
    if (progress_.on_step) progress_.on_step(rep);
    return Status();
  }

  // Validation, the epoch's report and its checkpoint.
  Status end_epoch() {
    const TrainState& s = r_.state;
    EpochReport er;
    er.epoch = s.epoch + 1;
    er.train_loss = s.epoch_loss_sum / static_cast<double>(std::max<int64_t>(s.epoch_targets, 1));
    if (!valid_.empty()) {
      KEEL_ASSIGN_OR_RETURN(const SequenceLoss vl, evaluate_loss(pass_, valid_, s.params));
      const double n = static_cast<double>(std::max<int64_t>(vl.num_targets, 1));
      er.valid_loss = r_.valid_loss = vl.loss_sum / n;
      er.valid_accuracy = static_cast<double>(vl.num_correct) / n;
    }
    if (progress_.on_epoch) progress_.on_epoch(er);
    if (!control_.on_checkpoint) return Status();
    TrainState at_end = s;  // the cursor at the next epoch's start
    ++at_end.epoch;
    at_end.next_example = 0;
    at_end.epoch_loss_sum = 0.0;
    at_end.epoch_targets = 0;
    at_end.adam_m = adam_.first_moment();
    at_end.adam_v = adam_.second_moment();
    return control_.on_checkpoint(at_end, er);
  }

  std::span<const TrainSequence> train_, valid_;
  const FinetuneConfig& config_;
  const FinetuneProgress& progress_;
  const FinetuneControl& control_;
  const TrainGate gate_{control_.stop, control_.pause};  // after control_: initialised from it
  FinetuneResult& r_;
  ModelPass<float> pass_;
  AdamW adam_;
  const int64_t total_steps_;
  std::vector<float> grads_;
  std::chrono::steady_clock::time_point start_time_;
};

}  // namespace

Result<FinetuneResult> finetune(const model::Model& base, std::span<const TrainSequence> train,
                                std::span<const TrainSequence> valid, const FinetuneConfig& config,
                                ThreadPool& pool, const FinetuneProgress& progress,
                                const FinetuneControl& control) {
  KEEL_TRY(config.validate());
  if (train.empty()) return Status::invalid_argument("no training examples");
  FinetuneResult r;
  KEEL_ASSIGN_OR_RETURN(r.layout, make_lora_layout(base, config.lora));
  Run run(base, train, valid, config, pool, progress, control, &r);
  KEEL_TRY(run.start());
  const Status s = run.go();
  if (!s.ok() &&
      !(s.code() == StatusCode::kCancelled && control.stop != nullptr && control.stop->load())) {
    return s;
  }
  r.stopped = !s.ok();
  run.snapshot_moments();
  r.params = r.state.params;
  r.steps = r.state.step;
  r.trained_tokens = r.state.trained_tokens;
  if (!r.step_losses.empty()) {
    r.first_loss = r.step_losses.front();
    r.last_loss = r.step_losses.back();
  }
  return r;
}

}  // namespace keel::train
