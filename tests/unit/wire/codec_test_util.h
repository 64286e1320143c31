// Helpers of the codec tests: a value encoded alone into a buffer, and a
// buffer decoded into an existing target (which must consume it whole).
#pragma once

#include "myelin/detail/codec.h"

namespace myelin::detail::test {

template <class T>
ByteBuffer enc(const T& v, const CodecCtx& c) {
  ByteBuffer b;
  WireWriter w(b);
  Codec<T>::encode(w, v, c);
  w.finish();
  return b;
}

template <class T>
void decodeInto(const ByteBuffer& b, T& target, const CodecCtx& c) {
  WireReader r(b.data(), b.size());
  r.setBudget(std::size_t{1} << 30);
  Codec<T>::decode(r, target, c);
  r.finish();
}

}  // namespace myelin::detail::test
