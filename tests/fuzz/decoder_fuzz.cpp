// libFuzzer entry point for Myelin's decoders (HELLO descriptor, Codec<T>
// values, frame streams). The first input byte picks the decoder; the rest is
// its input. Anything but success or InvalidMessageError aborts.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const myelin_fuzz::Context cx;
  if (size == 0) return 0;
  auto target = static_cast<myelin_fuzz::Target>(data[0] % static_cast<std::uint8_t>(myelin_fuzz::Target::kCount));
  try {
    myelin_fuzz::decodeAs(target, data + 1, size - 1, cx);
  } catch (const myelin::InvalidMessageError&) {
    // A rejected input: the expected outcome for most of them.
  }
  return 0;
}
