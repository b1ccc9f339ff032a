// fuzz-input — reads a fuzzer's byte string as a sequence of small choices.
//
// Why it exists: each target (native/fuzz/*-fuzz.cc) turns libFuzzer's bytes
// into calls on one room (a scan, a packed event stream, a feed file image).
// Taking choices from the front and payloads from what is left keeps a
// mutation local: flipping one byte changes one decision, so the fuzzer's
// coverage feedback climbs instead of every input being a new random program.
// Past the end every read returns 0 (an empty choice), never an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvroute::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // A little-endian integer of sizeof(T) bytes (zero-padded past the end).
  template <typename T>
  T integer() {
    T value = 0;
    for (size_t b = 0; b < sizeof(T); ++b) value |= static_cast<T>(byte()) << (8 * b);
    return value;
  }
  // A value in [0, n) (n >= 1) from one byte: biased, which a fuzzer does not mind.
  uint32_t below(uint32_t n) { return byte() % n; }
  // Up to `max` bytes; *count receives how many.
  const uint8_t* bytes(size_t max, size_t* count) {
    const size_t n = max < left() ? max : left();
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    *count = n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Stops the process with `what` when `ok` is false: a broken invariant is a
// finding, reported the way a sanitizer reports one (abort, so libFuzzer saves the input).
void require(bool ok, const char* what);

}  // namespace kvroute::fuzz
