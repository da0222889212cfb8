// The command-line side of `keel train-predictor` and `keel eval predictor`: registers both
// subcommands and their flags on the CLI11 app, and runs whichever one was parsed. Kept apart
// from keel_main.cpp so that adding the predictor costs the main three lines.
//
// Thread safety: one owner (main).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "commands.h"

namespace keel::cli {

class PredictorCli {
 public:
  using AddCompute = std::function<void(CLI::App*, ComputeOptions*)>;
  // `eval` is the `keel eval` subcommand; `argc/argv` are recorded as the command line.
  PredictorCli(CLI::App& app, CLI::App& eval, const AddCompute& add_compute, int argc, char** argv);

  // The exit code of the predictor command that was parsed, or nullopt when none was.
  [[nodiscard]] std::optional<int> run() const;

 private:
  TrainPredictorOptions train_;
  EvalPredictorOptions eval_;
  CLI::App* train_cmd_ = nullptr;
  CLI::App* eval_cmd_ = nullptr;
};

}  // namespace keel::cli
