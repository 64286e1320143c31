// The chunks of Calc::streamChunksOfVaryingSize, known to the service that
// sends them and to the test that checks them: sizes from 0 to 299 bytes,
// so that the calls' frames take one- and two-byte length prefixes in turn.
#pragma once

#include <cstdint>
#include <string>

namespace myelin_test {

inline std::string chunkOfVaryingSize(std::uint32_t i) {
  return std::string((i * 53u) % 300u, static_cast<char>('a' + i % 26u));
}

}  // namespace myelin_test
