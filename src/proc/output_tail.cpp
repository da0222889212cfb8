// OutputTail: a bounded deque of tagged lines under one mutex.
#include "proc/output_tail.h"

namespace keel::proc {

OutputTail::OutputTail(bool echo, size_t capacity, std::FILE* out)
    : echo_(echo), capacity_(capacity), out_(out) {}

void OutputTail::add(std::string_view name, std::string_view line) {
  std::string tagged = "[" + std::string(name) + "] " + std::string(line);
  MutexLock lock(mu_);
  if (echo_) std::fprintf(out_, "%s\n", tagged.c_str());
  if (capacity_ == 0) return;
  lines_.push_back(std::move(tagged));
  if (lines_.size() > capacity_) lines_.pop_front();
}

std::vector<std::string> OutputTail::lines() const {
  MutexLock lock(mu_);
  return {lines_.begin(), lines_.end()};
}

void OutputTail::print() const {
  if (echo_) return;
  MutexLock lock(mu_);
  for (const std::string& l : lines_) std::fprintf(out_, "%s\n", l.c_str());
}

}  // namespace keel::proc
