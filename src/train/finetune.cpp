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

Result<FinetuneResult> finetune(const model::Model& base, std::span<const TrainSequence> train,
                                std::span<const TrainSequence> valid, const FinetuneConfig& config,
                                ThreadPool& pool, const FinetuneProgress& progress) {
  KEEL_TRY(config.validate());
  if (train.empty()) return Status::invalid_argument("no training examples");
  FinetuneResult r;
  KEEL_ASSIGN_OR_RETURN(r.layout, make_lora_layout(base, config.lora));
  r.params = init_lora_params<float>(r.layout, config.seed);
  ModelPass<float> pass(base, r.layout, pool, config.checkpoint_layers);
  AdamW adam(config.optimizer, r.layout.num_params);
  const int64_t steps = total_steps(train.size(), config);
  std::vector<float> grads(r.layout.num_params);
  const auto start = std::chrono::steady_clock::now();
  for (int32_t epoch = 0; epoch < config.epochs; ++epoch) {
    const std::vector<size_t> order = epoch_order(train.size(), config.seed, epoch);
    SequenceLoss epoch_loss;
    for (size_t b = 0; b < order.size(); b += static_cast<size_t>(config.batch_size)) {
      const size_t e = std::min(order.size(), b + static_cast<size_t>(config.batch_size));
      int64_t targets = 0;
      for (size_t i = b; i < e; ++i) targets += train[order[i]].num_targets();
      std::fill(grads.begin(), grads.end(), 0.0f);
      SequenceLoss step_loss;
      for (size_t i = b; i < e; ++i) {
        const TrainSequence& s = train[order[i]];
        KEEL_ASSIGN_OR_RETURN(const SequenceLoss l,
                              pass.run(s, r.params.data(), grads.data(),
                                       1.0 / static_cast<double>(std::max<int64_t>(targets, 1))));
        step_loss.loss_sum += l.loss_sum;
        step_loss.num_targets += l.num_targets;
        step_loss.num_correct += l.num_correct;
        r.trained_tokens += static_cast<int64_t>(s.tokens.size());
      }
      const OptimizerStep os = adam.step(r.params, grads, steps);
      epoch_loss.loss_sum += step_loss.loss_sum;
      epoch_loss.num_targets += step_loss.num_targets;
      StepReport rep;
      rep.step = adam.steps();
      rep.total_steps = steps;
      rep.epoch = epoch + 1;
      const double n = static_cast<double>(std::max<int64_t>(step_loss.num_targets, 1));
      rep.loss = step_loss.loss_sum / n;
      rep.accuracy = static_cast<double>(step_loss.num_correct) / n;
      rep.learning_rate = os.learning_rate;
      rep.grad_norm = os.grad_norm;
      rep.trained_tokens = r.trained_tokens;
      rep.elapsed_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      r.step_losses.push_back(rep.loss);
      if (progress.on_step) progress.on_step(rep);
    }
    EpochReport er;
    er.epoch = epoch + 1;
    er.train_loss =
        epoch_loss.loss_sum / static_cast<double>(std::max<int64_t>(epoch_loss.num_targets, 1));
    if (!valid.empty()) {
      KEEL_ASSIGN_OR_RETURN(const SequenceLoss vl, evaluate_loss(pass, valid, r.params));
      const double n = static_cast<double>(std::max<int64_t>(vl.num_targets, 1));
      er.valid_loss = r.valid_loss = vl.loss_sum / n;
      er.valid_accuracy = static_cast<double>(vl.num_correct) / n;
    }
    if (progress.on_epoch) progress.on_epoch(er);
  }
  r.steps = adam.steps();
  r.first_loss = r.step_losses.front();
  r.last_loss = r.step_losses.back();
  return r;
}

}  // namespace keel::train
