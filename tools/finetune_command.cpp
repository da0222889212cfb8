// `keel finetune`: trains a LoRA adapter on chat JSONL (train/finetune_job.h) with a one-line
// progress display — redrawn in place on a terminal, a line per ~5 % of the steps otherwise.
#include <unistd.h>

#include <cstdio>

#include "commands.h"
#include "model/random_lora.h"
#include "train/finetune_job.h"
#include "train/progress_line.h"

namespace keel::cli {

int run_finetune(const FinetuneOptions& opts) {
  train::FinetuneJobSpec spec = opts.spec;
  Result<std::vector<model::LoraTarget>> targets = model::parse_lora_targets(opts.targets);
  if (!targets.ok()) return report_error(targets.status());
  spec.config.lora.targets = *targets;
  const auto decay = train::lr_decay_from_name(opts.lr_schedule);
  if (!decay)
    return report_error(Status::invalid_argument("unknown --lr-schedule " + opts.lr_schedule));
  spec.config.optimizer.decay = *decay;
  const bool tty = isatty(fileno(stderr)) != 0;
  bool drawn = false;
  train::FinetuneJobEvents events;
  events.info = [&](const std::string& line) { std::printf("%s\n", line.c_str()); };
  events.progress.on_step = [&](const train::StepReport& r) {
    const std::string line = train::format_step_line(r, spec.config.epochs);
    const int64_t every = std::max<int64_t>(1, r.total_steps / 20);
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      drawn = true;
    } else if (r.step % every == 0 || r.step == r.total_steps || r.step == 1) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  };
  events.progress.on_epoch = [&](const train::EpochReport& e) {
    if (drawn) std::fprintf(stderr, "\n");
    drawn = false;
    std::printf("epoch %d: train loss %.4f", e.epoch, e.train_loss);
    if (e.valid_loss >= 0) {
      std::printf(", validation loss %.4f (token accuracy %.3f)", e.valid_loss, e.valid_accuracy);
    }
    std::printf("\n");
    std::fflush(stdout);
  };
  PosixFileSystem fs;
  Result<train::FinetuneJobResult> r = train::run_finetune_job(spec, fs, events);
  if (drawn) std::fprintf(stderr, "\n");
  if (!r.ok()) return report_error(r.status());
  std::printf(
      "wrote %s: rank %lld LoRA (alpha %g), %lld steps, %lld trained tokens, loss %.4f -> %.4f\n",
      spec.output_path.c_str(), static_cast<long long>(r->train.layout.rank),
      double{r->train.layout.alpha}, static_cast<long long>(r->train.steps),
      static_cast<long long>(r->train.trained_tokens), r->train.first_loss, r->train.last_loss);
  return 0;
}

}  // namespace keel::cli
