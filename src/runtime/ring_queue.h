// RingQueue: a FIFO on one growable ring of slots. Unlike std::deque it keeps
// its storage when it empties, so a queue that is filled and drained over
// and over (the executor's jobs, the write queue) allocates nothing once it
// has reached its peak size.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace myelin::detail {

template <class T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  void push_back(T v) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(v);
    ++size_;
  }
  T& front() { return slots_[head_]; }
  /// The i-th element from the front.
  T& operator[](std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  /// Removes the front element (its slot is reset to an empty T).
  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  /// Room for `n` more elements: pushing them allocates nothing.
  void reserve(std::size_t n) {
    while (slots_.size() < size_ + n) grow();
  }
  void clear() {
    while (size_) pop_front();
    head_ = 0;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // a power of two in size
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace myelin::detail
